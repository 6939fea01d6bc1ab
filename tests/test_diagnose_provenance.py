"""diagnose judges only what is about the server it diagnoses: a --bench of the wrong kind is refused, a bench
of another server lowers what rests on it and says so, a target that serves no inference route is named as
such (exit 2, not "no problems found"), and a replay lists the saved findings it could not find again."""
from __future__ import annotations

import dataclasses
import http.server
import json
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage.cli import app
from triage.core.report import ReportKind, Target
from triage.core.report_io import read_report, write_report

OLD = Path(__file__).resolve().parent / "fixtures" / "reports_0_1_0"
SAVED = OLD / "diagnose_kv_saturated.json"        # a diagnose report that embeds the bench it judged


def cli(*args: str):
    return CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"}).invoke(app, ["--no-color", *args])


def _bench_of(saved: Path, tmp: Path, **target) -> Path:
    """The saved diagnosis's bench, as the bench report `triage bench` would have written, with `target`."""
    old = read_report(saved)
    bench = dataclasses.replace(old, kind=ReportKind.BENCH, probes=(), findings=(), skipped_rules=(),
                                target=dataclasses.replace(old.target, **target))
    return write_report(bench, tmp / "bench.json")


def _findings(out: Path) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(out.read_text())["findings"]}


def test_a_diagnose_report_given_as_bench_is_refused_with_what_it_is(tmp_path):
    res = cli("diagnose", "--from", str(SAVED), "--bench", str(SAVED))
    assert res.exit_code == 2
    assert "this is a diagnose report; --bench takes a bench report" in res.output


def test_a_plan_report_is_refused_as_bench_but_taken_as_baseline(tmp_path):
    plan = tmp_path / "plan.json"
    assert cli("plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json", str(plan)).exit_code == 0
    assert "this is a plan report" in cli("diagnose", "--from", str(SAVED), "--bench", str(plan)).output
    assert cli("diagnose", "--from", str(SAVED), "--baseline", str(plan)).exit_code == 0


def test_a_bench_of_another_server_lowers_what_rests_on_it_and_says_where_it_came_from(tmp_path):
    same, other = tmp_path / "same.json", tmp_path / "other.json"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ours = _bench_of(SAVED, tmp_path / "a")
    theirs = _bench_of(SAVED, tmp_path / "b", url="http://10.0.0.5:8000", model="Qwen/Qwen3-8B")
    assert cli("diagnose", "--from", str(SAVED), "--bench", str(ours), "--json", str(same)).exit_code == 0
    assert cli("diagnose", "--from", str(SAVED), "--bench", str(theirs), "--json", str(other)).exit_code == 0
    before, after = _findings(same), _findings(other)
    assert before.keys() == after.keys()
    # BENCH003 (the SLO missed) rests on the bench alone: it drops to "possible" and says why.
    assert before["BENCH003"]["certainty"] == "confirmed" and after["BENCH003"]["certainty"] == "possible"
    said = ("recorded against another server: URL http://10.0.0.5:8000, not http://127.0.0.1:8000; "
            "model Qwen/Qwen3-8B, not meta-llama/Llama-3.1-8B-Instruct")
    assert said in after["BENCH003"]["message"] and said not in before["BENCH003"]["message"]
    # KV002 and SCHED003 read the bench too, but the server's own /metrics show the same: they keep their
    # certainty and say where their bench evidence came from.
    for code in ("KV002", "SCHED003"):
        assert after[code]["certainty"] == before[code]["certainty"] != "possible"
        assert said in after[code]["message"] and "This server's own metrics support" in after[code]["message"]
    # A finding that rests on no bench is untouched.
    from triage.diagnose.provenance import weigh

    kv004 = next(f for f in read_report(same).findings if f.code == "KV004")
    alone = dataclasses.replace(kv004, evidence={"server_config.kv_cache_dtype": "auto"})
    assert weigh((alone,), read_report(theirs), read_report(same).target, "bench", "bench report") == (alone,)


def test_the_same_server_under_another_loopback_name_is_the_same_server(tmp_path):
    from triage.diagnose.provenance import differences

    recorded = read_report(SAVED)
    recorded = dataclasses.replace(recorded, target=dataclasses.replace(recorded.target, url="http://localhost:8000"))
    assert differences(recorded, Target(url="http://127.0.0.1:8000", model=recorded.target.model)) == []
    assert differences(recorded, Target(url="http://127.0.0.1:8001")) == ["URL http://localhost:8000, not "
                                                                          "http://127.0.0.1:8001"]


@pytest.fixture()
def file_server(tmp_path):
    """`python -m http.server` on loopback: answers HTTP, serves no inference route."""
    (tmp_path / "index.html").write_text("<html>files</html>")
    handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path), **kw)  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_file_server_is_named_as_no_inference_server_and_the_report_still_written(file_server, tmp_path):
    out = tmp_path / "d.json"
    res = cli("diagnose", "--url", file_server, "--window-s", "0", "--skip", "storage,kernel_log",
              "--json", str(out))
    assert res.exit_code == 2, res.output
    assert f"{file_server} answered, but none of the routes an inference server serves" in res.output
    assert "it is not an LLM inference server" in res.output
    assert out.is_file() and json.loads(out.read_text())["target"]["url"] == file_server


def test_a_replay_lists_each_saved_finding_it_did_not_find_again_and_why(tmp_path):
    res = cli("diagnose", "--from", str(SAVED), "--disable", "KV004")
    assert res.exit_code == 0, res.output
    assert "not re-derived: 1 of the saved report's findings, and why:" in res.output
    assert "KV004" in res.output.split("not re-derived:")[1].splitlines()[1]
    assert "turned off (--disable or triage.toml)" in res.output
    # Every other saved finding comes back: the replay judges the bench the saved report carries.
    whole = tmp_path / "whole.json"
    assert cli("diagnose", "--from", str(SAVED), "--json", str(whole)).exit_code == 0
    assert set(_findings(whole)) == {f["code"] for f in json.loads(SAVED.read_text())["findings"]}
