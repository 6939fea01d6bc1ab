"""`triage watch`: what one cycle exports (signals.py, through prometheus-client's exposition), its errors,
and end to end: a real Prometheus on loopback scrapes `triage watch` watching an undersized reference
server under load, and its query API shows the KV finding."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tests.live_prometheus import needs_prometheus, prometheus, query
from tests.rules_fixtures import FIXTURES, load_case
from triage.cli import app
from triage.core.report import ReportKind, Target, new_report
from triage.probes.host import host_info
from triage.rules import evaluate
from triage.watch.exporter import WatchCollector
from triage.watch.signals import PROBE_FAILED, PROBE_NOT_APPLICABLE, PROBE_OK, cycle_families


def _cycle(fixture: str):
    snap, bench, baseline, config, _ = load_case(FIXTURES / fixture)
    result = evaluate(snap)
    report = new_report(ReportKind.DIAGNOSE, host_info(()), Target(engine="vllm", model="llama"),
                        probes=snap.probes, findings=tuple(result.findings), skipped_rules=tuple(result.skipped))
    return report, snap


def _scrape(collector: WatchCollector) -> dict[str, list]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_a_cycle_exports_findings_probe_status_skipped_rules_and_signals():
    report, snap = _cycle("KV001/positive_saturated_with_queue.json")
    collector = WatchCollector()
    collector.update(cycle_families(report, snap), finished_at_s=1_700_000_000.0, duration_s=3.5)
    families = _scrape(collector)
    findings = {s.labels["code"]: s for s in families["triage_finding"]}
    assert "KV001" in findings and findings["KV001"].value == 1.0
    assert findings["KV001"].labels["severity"] == next(f.severity.value for f in report.findings if f.code == "KV001")
    assert findings["KV001"].labels["engine"] == "vllm" and findings["KV001"].labels["model"] == "llama"
    status = {s.labels["probe"]: s.value for s in families["triage_probe_status"]}
    assert status["gpu"] == PROBE_OK and set(status) == {p.name for p in snap.probes}
    assert families["triage_kv_cache_usage_ratio"][0].value == pytest.approx(
        snap.get("server_metrics").data.kv_cache_usage_frac)
    clocks = {s.labels["gpu"]: s.value for s in families["triage_gpu_sm_clock_mhz"]}
    assert clocks == {"0": snap.get("gpu").data.gpus[0].sm_clock_mhz}
    assert {s.labels["code"] for s in families.get("triage_rule_skipped", [])} == {s.code for s in report.skipped_rules}
    assert families["triage_watch_last_cycle_duration_seconds"][0].value == 3.5
    assert families["triage_watch_cycles"][0].value == 1.0


def test_a_probe_that_could_not_run_exports_its_status_and_no_signal():
    report, snap = _cycle("KV001/skipped_no_metrics.json")
    collector = WatchCollector()
    collector.update(cycle_families(report, snap), time.time(), 1.0)
    families = _scrape(collector)
    status = {s.labels["probe"]: s.value for s in families["triage_probe_status"]}
    assert snap.get("server_metrics").status.value != "ok"
    assert status["server_metrics"] in (PROBE_FAILED, PROBE_NOT_APPLICABLE)
    assert "triage_kv_cache_usage_ratio" not in families
    assert "KV001" in {s.labels["code"] for s in families["triage_rule_skipped"]}


@pytest.mark.parametrize("args, message", [
    (["--interval", "soon"], "expected a duration"),
    (["--interval", "1s", "--window-s", "2"], "shorter than --interval (1 s)"),
    (["--interval", "10s", "--window-s", "0"], "must be > 0"),
    (["--metrics-port", "70000"], "not a port"),
    (["--cycles", "0"], "at least 1"),
])
def test_bad_options_are_clear_errors(args, message):
    result = CliRunner().invoke(app, ["watch", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_taken_metrics_port_is_a_clear_error():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["watch", "--metrics-port", str(port), "--cycles", "1"])
    assert result.exit_code == 2 and f"--metrics-port {port}" in result.output, result.output


def _load(url: str, stop: threading.Event, clients: int = 8) -> list[threading.Thread]:
    model = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]

    def one(i: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while not stop.is_set():
                try:
                    client.post("/v1/completions", json={"model": model, "prompt": f"hi {i} " * 12, "max_tokens": 40})
                except httpx.HTTPError:
                    time.sleep(0.1)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    return threads


@pytest.mark.slow
@needs_prometheus
def test_prometheus_scrapes_triage_watch_and_sees_the_undersized_servers_kv_finding(tmp_path):
    launcher = pytest.importorskip("triage.reference_engine.serve.launcher")
    # 16 blocks of 16 tokens hold two 100-token requests: eight clients keep the cache full and a queue.
    with launcher.start_reference_server("tiny", extra_args=("--num-kv-blocks", "16", "--block-size", "16",
                                                             "--max-num-seqs", "8")) as server:
        stop = threading.Event()
        _load(server.url, stop)
        watch = subprocess.Popen([sys.executable, "-m", "triage", "watch", "--url", server.url, "--interval", "4s",
                                  "--window-s", "2", "--metrics-port", "0", "--cycles", "8"],
                                 stderr=subprocess.PIPE, text=True)
        try:
            line = watch.stderr.readline()
            match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
            assert match, line
            target = f"127.0.0.1:{match.group(1)}"
            with prometheus(tmp_path, [target]) as prom:
                deadline = time.monotonic() + 60
                found = []
                while time.monotonic() < deadline and not found:
                    found = query(prom, 'triage_finding{code="KV001"} == 1')
                    time.sleep(1)
                assert found, query(prom, "triage_finding")
                labels = found[0]["metric"]
                assert labels["engine"] == "reference" and labels["job"] == "triage"
                assert labels["severity"] in ("high", "critical")
                assert query(prom, 'triage_probe_status{probe="server_metrics"}')[0]["value"][1] == "1"
                # The gauge is the usage at the end of each window, and a window can end just as requests finish
                # (a CI run read 0.375 there): the peak Prometheus has stored is what says the cache filled.
                # Prometheus may not have scraped a full-cache window yet when the finding shows: wait for one.
                peak: list = []
                while time.monotonic() < deadline + 30:
                    peak = query(prom, "max_over_time(triage_kv_cache_usage_ratio[5m])")
                    if peak and float(peak[0]["value"][1]) > 0.5:
                        break
                    time.sleep(1)
                assert peak and float(peak[0]["value"][1]) > 0.5, peak
        finally:
            stop.set()
            watch.terminate()
            watch.wait(30)


@pytest.mark.parametrize("interval, window", [("2s", 1.0), ("1s", 0.5), ("500ms", 0.25), ("30s", 2.0)])
def test_the_default_window_fits_any_valid_interval(interval, window, monkeypatch):
    """A default never rejects a valid value of another option: --window-s defaults to at most half the
    interval. One real cycle runs against a loopback server at the shortest intervals."""
    from tests.fake_servers import FakeOpenAIServer
    from triage.watch import loop

    seen: list[float] = []
    real = loop.watch_forever

    def spy(opts, *args, **kwargs):
        seen.append(opts.window_s)
        return real(opts, *args, **kwargs)

    monkeypatch.setattr(loop, "watch_forever", spy)
    with FakeOpenAIServer() as srv:
        result = CliRunner().invoke(app, ["watch", "--url", srv.url, "--interval", interval, "--cycles", "1",
                                          "--metrics-port", "0", "--skip", "storage,network"])
    assert result.exit_code == 0, result.output
    assert seen == [pytest.approx(window)]
