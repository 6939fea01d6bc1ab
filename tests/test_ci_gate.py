"""deploy/ci/gate.sh, the CI recipe in plain shell, run for real: against two reference servers on 127.0.0.1
(one slowed by `triage serve --inject-delay-ms`, started by the script itself), then once more against the
server the baseline came from."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GATE = REPO / "deploy" / "ci" / "gate.sh"
TRIAGE = f"{sys.executable} -m triage"
BENCH_ARGS = "--concurrency 1,2 --num-requests 4 --warmup 1 --input-len 16 --output-len 8"
# Wide limits: the A/A run must pass on a busy 2-core box, and a 200 ms sleep before every generation is
# still far past them (TTFT many times over, the request rate more than halved).
LIMITS = ("ttft_ms.p50=100%,ttft_ms.p99=100%,tpot_ms.p50=100%,tpot_ms.p99=100%,itl_ms.p99=100%,"
          "e2e_ms.p99=100%,output_tokens_per_s=50%,requests_per_s=50%")


def _gate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["TRIAGE"] = TRIAGE
    return subprocess.run(["sh", str(GATE), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,message", [
    ((), "--url is required"),
    (("--url", "http://127.0.0.1:9"), "--baseline is required"),
    (("--url", "http://127.0.0.1:9", "--baseline", "b.json", "--inconclusive", "maybe"), "is not pass or fail"),
    (("--url", "http://127.0.0.1:9", "--baseline", "b.json", "--wait-s", "soon"), "is not a whole number"),
    (("--bogus",), "unknown option --bogus"),
])
def test_bad_options_are_one_line_errors(args, message):
    done = _gate(*args, timeout=30)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_gate_fails_on_the_slowed_server_and_passes_on_the_same_one(tmp_path):
    launcher = pytest.importorskip("triage.reference_engine.serve.launcher")
    baseline, summary = tmp_path / "baseline" / "bench.json", tmp_path / "summary.md"
    common = ("--baseline", str(baseline), "--summary", str(summary), "--bench-args", BENCH_ARGS,
              "--max-regression", LIMITS)
    with launcher.start_reference_server("tiny") as fast:
        # No baseline yet: this run becomes the first one (the pipeline then stores the kept report).
        first = _gate("--url", fast.url, "--out", str(tmp_path / "first"), *common)
        assert first.returncode == 0, first.stderr
        assert "no baseline yet" in summary.read_text() and "is the first one" in first.stdout
        kept = json.loads((tmp_path / "first" / "bench.json").read_text())
        assert kept["bench"]["config"]["repeat"] == 3 and kept["bench"]["config"]["repeat_order"] == "rounds"
        baseline.parent.mkdir()
        shutil.copy(tmp_path / "first" / "bench.json", baseline)

        # The candidate: a server slowed by 200 ms before each generation, started by the gate itself.
        port = _free_port()
        slow = _gate("--url", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "slow"), "--server-cmd",
                     f"{TRIAGE} serve --model tiny --host 127.0.0.1 --port {port} --inject-delay-ms 200", *common)
        assert slow.returncode == 1, slow.stdout + slow.stderr
        text = summary.read_text()
        assert "compare: FAIL" in text and "REGRESSION" in text
        section = json.loads((tmp_path / "slow" / "compare.json").read_text())["compare"]
        rows = {(m["level"], m["metric"]): m for m in section["metrics"]}
        assert section["verdict"] == "fail" and section["regressions"] >= 2
        for level in ("c=1", "c=2"):
            ttft = rows[(level, "ttft_ms.p50")]
            assert ttft["verdict"] == "regression" and ttft["interval_from"] == "repeats"
            assert ttft["candidate"] - ttft["base"] > 150.0            # the 200 ms sleep, seen by the client
        assert (tmp_path / "slow" / "bench.json").is_file()           # the new report is kept either way
        assert (tmp_path / "slow" / "summary.md").read_text() in text
        # the slow server was stopped when its bench was done
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0

        # The same server as the baseline's: the gate passes.
        same = _gate("--url", fast.url, "--out", str(tmp_path / "same"), *common)
        assert same.returncode == 0, same.stdout + same.stderr
        assert "gate.sh: pass" in same.stdout
        last = (tmp_path / "same" / "summary.md").read_text()
        assert "compare: PASS" in last and "REGRESSION" not in last
        assert summary.read_text().endswith(last)


def test_the_github_workflow_runs_the_same_gate():
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load((REPO / "deploy" / "ci" / "github-actions.yml").read_text())
    steps = flow["jobs"]["gate"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "deploy/ci/gate.sh" in runs and '--summary "$GITHUB_STEP_SUMMARY"' in runs
    assert "gh run download" in runs and "--name triage-baseline" in runs
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and "triage-gate/bench.json" in upload["with"]["path"]
    assert "triage-baseline" in upload["with"]["name"]
    assert GATE.stat().st_mode & 0o111          # executable, as the workflow calls it
