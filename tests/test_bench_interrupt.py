"""Ctrl-C in the middle of a level, as a new user does it: `triage bench --concurrency 1,4` against the bundled
reference engine, SIGINT once some requests of c=1 have finished. The cut level is kept as a partial level
(the requests that finished are its samples; those in flight are not counted), the report and the files are
written, the exit code is 130, and stderr holds no asyncio leftovers ("Future exception was never retrieved",
"Task was destroyed but it is pending") and no traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from triage.core.report_io import read_report

REPO = Path(__file__).resolve().parent.parent
FINISHED_BEFORE_CTRL_C = 3
# Far more than the level can finish before the signal, even on a fast host: c=1 is always the level cut.
NUM_REQUESTS = 5000


def _sigint_as_at_a_terminal() -> None:
    """In the child, before exec: SIGINT back to its default disposition. A job started in the background by a
    non-interactive shell (as CI does) inherits SIGINT *ignored*; Python then installs no KeyboardInterrupt
    handler, and the Ctrl-C this test sends would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _finished(jsonl: Path, level: str) -> int:
    """Measured requests of `level` already written to the per-request JSONL (one line per finished request)."""
    if not jsonl.exists():
        return 0
    count = 0
    for line in jsonl.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # a line still being written
            continue
        count += row.get("level") == level and not row.get("warmup")
    return count


def _wait_for(predicate, proc: subprocess.Popen, timeout_s: float) -> None:
    """Poll until `predicate()` holds; fail early when the bench exits first (generous: a loaded 2-core host
    starts the reference engine slowly)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"bench exited {proc.returncode} before the Ctrl-C\n{out[-2000:]}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the bench's first requests")
        time.sleep(0.05)


@pytest.mark.slow
def test_ctrl_c_mid_level_keeps_it_as_a_partial_level_and_exits_130(tmp_path, report_validator):
    pytest.importorskip("torch")  # the bundled reference engine (the 'engine' extra)
    out_dir = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "triage", "bench", "--concurrency", "1,4", "--num-requests", str(NUM_REQUESTS),
         "--output-dir", str(out_dir)],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_sigint_as_at_a_terminal)
    try:
        _wait_for(lambda: _finished(out_dir / "requests.jsonl", "c=1") >= FINISHED_BEFORE_CTRL_C, proc, 300)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 130, f"{out[-3000:]}\n{err[-3000:]}"
    for leftover in ("Future exception was never retrieved", "Task was destroyed", "Traceback",
                     "exception was never retrieved"):
        assert leftover not in err, err
    data = report_validator(read_report(out_dir / "bench.json"))
    bench = data["bench"]
    assert bench["config"]["interrupted"] is True
    assert bench["config"]["partial_level"] == "c=1"
    assert [lv["concurrency"] for lv in bench["levels"]] == [1]
    level = bench["levels"][0]
    counts = level["requests"]
    assert counts["completed"] >= FINISHED_BEFORE_CTRL_C
    # The requests in flight at the Ctrl-C were cut, not failed: every counted request is one the JSONL holds.
    assert counts["failed"] == 0 and counts["errors_by_kind"] == {}
    assert counts["completed"] == _finished(out_dir / "requests.jsonl", "c=1")
    assert len(level["samples"]["e2e_ms"]) == counts["completed"]
    assert any("this level is partial" in note for note in level["notes"]), level["notes"]
    said = " ".join(out.split())  # the terminal may fold the long note
    assert f"interrupted during c=1: {counts['completed']} requests finished; that level is partial" in said, out
    assert (out_dir / "levels.csv").is_file()
