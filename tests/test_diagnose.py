"""triage diagnose: the runner, the full command on this host, replay, --fail-on, and the bundle's redaction."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.nvml.fake_pynvml import load as load_nvml
from triage.cli import app
from triage.core.report_io import read_report, to_dict
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot
from triage.diagnose import DiagnoseOptions, diagnose, load_snapshot
from triage.diagnose.bundle import write_bundle
from triage.probes.gpu import probe_gpu
from triage.probes.http import HttpResponse
from triage.probes.server_metrics import probe_server_metrics
from triage.probes.threaded import ProbeSpec, run_probe, run_probes

REPO = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"
SECRETS = ("sk-bundle-secret-0123456789", "hf_bundleSecretToken987654321", "hunter2-plain-password")


def cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, ["--no-color", *args], env=env or {})


# -- runner -------------------------------------------------------------------------------------

def test_runner_times_out_a_hung_probe():
    def hang() -> ProbeResult:
        time.sleep(5)
        return ProbeResult("hang", ProbeStatus.OK, 0.0)

    t0 = time.perf_counter()
    r = run_probe(ProbeSpec("hang", hang, timeout_s=0.2))
    assert time.perf_counter() - t0 < 2
    assert r.status is ProbeStatus.TIMEOUT and "0.2 s" in r.reason
    assert r.duration_s >= 0.2


def test_runner_turns_an_exception_into_error_and_redacts_it():
    def boom() -> ProbeResult:
        raise RuntimeError("token=abcdefghijkl went wrong")

    r = run_probe(ProbeSpec("boom", boom, timeout_s=2))
    assert r.status is ProbeStatus.ERROR
    assert "RuntimeError" in r.reason and "abcdefghijkl" not in r.reason


def test_runner_runs_concurrently_and_keeps_order_and_its_own_duration():
    def slow(name):
        def fn():
            time.sleep(0.3)
            return ProbeResult(name, ProbeStatus.OK, 99.0, None, {"x": 1})
        return fn

    t0 = time.perf_counter()
    out = run_probes([ProbeSpec(n, slow(n), 2) for n in ("a", "b", "c")])
    assert time.perf_counter() - t0 < 0.85
    assert [r.name for r in out] == ["a", "b", "c"]
    assert all(0.25 <= r.duration_s < 2 for r in out)   # the runner's clock, not the probe's claim


# -- the whole command on this host -------------------------------------------------------------

def test_full_diagnose_on_this_host_is_fast_and_clean(tmp_path, report_validator):
    out = tmp_path / "diag.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIAGE_NO_DISCOVERY": "1", "NO_COLOR": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "triage", "diagnose", "--json", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert elapsed < 10, f"diagnose took {elapsed:.1f} s"
    data = report_validator(json.loads(out.read_text()))
    probes = {p["name"]: p for p in data["probes"]}
    assert set(probes) == {"server_config", "engine_identity", "gpu", "cpu", "memory", "server_process",
                           "server_metrics", "server_peers", "topology", "network", "kernel_log", "logs", "storage"}
    import torch

    if not torch.cuda.is_available():
        assert probes["gpu"]["status"] == "unsupported" and probes["gpu"]["reason"]
    assert probes["cpu"]["status"] == "ok" and probes["cpu"]["data"]["window_s"] == 2.0
    assert probes["memory"]["data"]["copy_bandwidth_gbps"] > 0
    assert all(p["duration_s"] >= 0 for p in data["probes"])
    assert "host and GPU probes only" in proc.stdout and "local discovery is off" in proc.stdout


# -- replay and --fail-on -----------------------------------------------------------------------

def _troubled_snapshot(path: Path) -> Path:
    """A snapshot of a power-capped A100 whose vLLM preempts with a full KV cache, from the fakes."""
    gpu = probe_gpu(nvml=load_nvml("a100_power_capped_pcie_gen3x8.json"), window_s=3.0,
                    sys_root=str(FIX / "sysfs" / "two_node_powersave"), sleep=lambda s: None)
    before = HttpResponse(200, (FIX / "prom" / "vllm_v1_two_engines_before.txt").read_text())
    after = HttpResponse(200, (FIX / "prom" / "vllm_v1_two_engines_after.txt").read_text())
    answers = [before, after]
    metrics = probe_server_metrics("http://10.1.2.3:8000", window_s=10.0, num_intermediate=0,
                                   get=lambda url, t: answers.pop(0), sleep=lambda s: None)
    assert gpu.ok and metrics.ok
    path.write_text(json.dumps({"window_s": 10.0, "probes": to_dict([gpu, metrics])}))
    return path


def test_replay_runs_the_rules_and_fail_on_gates(tmp_path):
    snap = _troubled_snapshot(tmp_path / "snap.json")
    out = tmp_path / "replayed.json"
    result = cli("diagnose", "--from", str(snap), "--json", str(out), "--fail-on", "high")
    report = read_report(out)
    codes = [f.code for f in report.findings]
    assert "KV002" in codes                       # 3 preemptions/s in the window
    assert report.findings[0].severity.rank <= report.findings[-1].severity.rank
    assert result.exit_code == 1
    assert cli("diagnose", "--from", str(snap), "--format", "json").exit_code == 0


def _replayed_codes(tmp_path: Path, *args: str) -> list[str]:
    snap = tmp_path / "snap.json"
    if not snap.exists():
        _troubled_snapshot(snap)
    out = tmp_path / "out.json"
    out.unlink(missing_ok=True)
    result = cli("diagnose", "--from", str(snap), "--json", str(out), *args)
    assert result.exit_code == 0, result.output
    return [f.code for f in read_report(out).findings]


def test_disable_turns_the_named_rules_off(tmp_path):
    codes = _replayed_codes(tmp_path)
    assert {"KV002", "GPU003"} <= set(codes)
    codes = _replayed_codes(tmp_path, "--disable", "kv002, GPU003")
    assert "KV002" not in codes and "GPU003" not in codes and "KV001" in codes


def test_config_threshold_override_changes_a_finding(tmp_path):
    # The fake A100 is capped at 300 of its default 400 W (0.75): GPU003 fires below 0.98 of the default.
    toml = tmp_path / "strict.toml"
    toml.write_text('[thresholds]\n"GPU003.power_limit_frac_of_default" = 0.7\n[rules]\ndisable = ["KV001"]\n')
    codes = _replayed_codes(tmp_path, "--config", str(toml))
    assert "GPU003" not in codes and "KV001" not in codes and "KV002" in codes


def test_triage_toml_in_the_working_directory_is_the_default(tmp_path, monkeypatch):
    (tmp_path / "triage.toml").write_text('[rules]\ndisable = ["GPU003"]\n')
    monkeypatch.chdir(tmp_path)
    codes = _replayed_codes(tmp_path)
    assert "GPU003" not in codes and "KV002" in codes


@pytest.mark.parametrize("body, message", [
    ("[thresholds\n", "not valid TOML"),
    ('[thresholds]\n"GPU003.no_such_knob" = 1\n', "GPU003.no_such_knob"),
    ('[rulez]\ndisable = ["GPU003"]\n', "unknown table [rulez]"),
    ('[rules]\ndisable = ["GPU999"]\n', "GPU999"),
])
def test_a_bad_config_is_exit_2_with_one_line(tmp_path, body, message):
    snap = _troubled_snapshot(tmp_path / "snap.json")
    bad = tmp_path / "bad.toml"
    bad.write_text(body)
    result = cli("diagnose", "--from", str(snap), "--config", str(bad))
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_a_missing_config_or_unknown_disabled_code_is_exit_2(tmp_path):
    snap = _troubled_snapshot(tmp_path / "snap.json")
    missing = cli("diagnose", "--from", str(snap), "--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 2 and "no such config file" in missing.output
    unknown = cli("diagnose", "--from", str(snap), "--disable", "KV0002")
    assert unknown.exit_code == 2 and "KV0002" in unknown.output and "Traceback" not in unknown.output


def test_replay_of_a_report_keeps_its_probes(tmp_path):
    snap = _troubled_snapshot(tmp_path / "snap.json")
    first = tmp_path / "first.json"
    assert cli("diagnose", "--from", str(snap), "--json", str(first)).exit_code == 0
    snapshot, old = load_snapshot(first)
    assert old is not None and [p.name for p in snapshot.probes] == ["gpu", "server_metrics"]
    second = tmp_path / "second.json"
    assert cli("diagnose", "--from", str(first), "--json", str(second)).exit_code == 0
    assert [f.code for f in read_report(second).findings] == [f.code for f in read_report(first).findings]


@pytest.mark.parametrize("args, message", [
    (["--from", "/nonexistent/report.json"], "no such file"),
    (["--fail-on", "urgent", "--from", "x.json"], "not a severity"),
    (["--window-s", "-1", "--no-discover"], "out of range"),
    (["--log", "/nonexistent.log", "--no-discover"], "no such file"),
    (["--skip", "gpux", "--no-discover"], "no such probe"),
])
def test_bad_input_is_a_clear_error_exit_2(args, message):
    result = cli("diagnose", *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_from_a_non_snapshot_json_is_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": "world"}))
    result = cli("diagnose", "--from", str(bad))
    assert result.exit_code == 2 and "snapshot" in result.output


# -- secrets: never in the report or the bundle -------------------------------------------------

FAKE_VLLM_HTTP = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


@pytest.fixture
def fake_vllm_with_secrets():
    env = {**os.environ, "HF_TOKEN": SECRETS[1], "MY_SERVICE_PASSWORD": SECRETS[2], "NCCL_DEBUG": "INFO"}
    argv = [sys.executable, "-c", FAKE_VLLM_HTTP, "vllm", "serve", "/models/x", "--max-num-seqs", "8",
            "--api-key", SECRETS[2], f"--hf-token={SECRETS[1]}", "--served-model-name", "x"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait(5)


def test_secrets_never_reach_the_report_or_the_bundle(tmp_path, fake_vllm_with_secrets, report_validator):
    proc, port = fake_vllm_with_secrets
    log = tmp_path / "server.log"
    log.write_text(f"INFO starting with api_key={SECRETS[0]}\nWARNING Using a slow tokenizer\n"
                   f"DEBUG header Authorization: Bearer {SECRETS[0]}\nDEBUG hf token {SECRETS[1]}\n"
                   # vLLM's startup line and an echoed command line carry plain (unprefixed) secrets
                   f"INFO non-default args: {{'model': 'x', 'api_key': '{SECRETS[2]}'}}\n"
                   f"WARNING preempted 2 seqs; launched as vllm serve x --api-key {SECRETS[2]} --port 8000\n"
                   f'INFO config {{"api_key": ["{SECRETS[2]}"]}}\n')
    result = diagnose(DiagnoseOptions(url=f"http://user:{SECRETS[2]}@127.0.0.1:{port}", window_s=0.3,
                                      log_path=str(log), bandwidth_budget_s=0.05, nvml=load_nvml(
                                          "h100_x2_healthy_nvlink.json")))
    assert result.discovery.pid == proc.pid and result.discovery.engine == "vllm"
    process = result.snapshot.data("server_process")
    assert process.debug_env["NCCL_DEBUG"] == "INFO"
    config = result.snapshot.data("server_config")
    assert config.max_num_seqs == 8 and config.sources["max_num_seqs"] == "cmdline"
    assert result.snapshot.data("logs").slow_tokenizer is True
    report_validator(result.report)
    bundle = write_bundle(tmp_path / "out.tar.gz", result, str(log))
    blobs = {}
    with tarfile.open(bundle) as tar:
        for member in tar.getmembers():
            blobs[member.name] = tar.extractfile(member).read().decode()
    assert {"triage-bundle/report.json", "triage-bundle/snapshot.json", "triage-bundle/logs/server.log",
            "triage-bundle/README.txt"} <= set(blobs)
    assert "slow tokenizer" in blobs["triage-bundle/logs/server.log"]
    report_text = json.dumps(to_dict(result.report))
    for secret in SECRETS:
        assert secret not in report_text, secret
        for name, text in blobs.items():
            assert secret not in text, (secret, name)


def test_skip_and_a_zero_window():
    result = diagnose(DiagnoseOptions(window_s=0, discover=False, skip=("storage", "kernel_log", "memory")))
    names = [p.name for p in result.snapshot.probes]
    assert "storage" not in names and "kernel_log" not in names and "memory" not in names
    assert result.discovery.how == "none" and result.snapshot.window_s == 0
    cpu = result.snapshot.get("cpu")
    assert cpu.ok and cpu.data.window_s == 0


def test_snapshot_data_accessor_ignores_failed_probes():
    snap = Snapshot(probes=(ProbeResult("gpu", ProbeStatus.UNSUPPORTED, 0.1, "no NVML"),))
    assert snap.data("gpu") is None and snap.get("gpu").reason == "no NVML"


def test_bench_report_reaches_the_rules(tmp_path):
    from tests.factories import bench_report, level
    from triage.core.report_io import write_report

    snap = _troubled_snapshot(tmp_path / "snap.json")
    bench_path = write_report(bench_report([level(1, [100] * 20, [20] * 20, [2000] * 20, 50.0),
                                            level(16, [900] * 20, [60] * 20, [9000] * 20, 55.0)]),
                              tmp_path / "bench.json")
    out = tmp_path / "with_bench.json"
    assert cli("diagnose", "--from", str(snap), "--bench", str(bench_path), "--json", str(out)).exit_code == 0
    report = read_report(out)
    assert report.bench is not None and len(report.bench.levels) == 2
    # Rules that need only a bench report are no longer skipped for want of one.
    assert not any("no bench report" in s.reason for s in report.skipped_rules)
    not_a_bench = cli("diagnose", "--from", str(snap), "--bench", str(snap))
    assert not_a_bench.exit_code == 2


def test_ctrl_c_during_the_probes_keeps_what_was_measured(python_sigint_handler):
    import _thread

    class InterruptingNvml:
        def nvmlInit(self):
            _thread.interrupt_main()      # as if the user pressed Ctrl-C while the GPU was being read
            time.sleep(1.0)
            raise RuntimeError("never reached in time")

    # The Ctrl-C lands in phase 2 (the GPU probe); the main thread sees it when that phase's first join returns,
    # so phase 3 (storage, given nothing to read) never starts: it is the probe that is certainly cut off,
    # whatever the host's load does to the timing of the others.
    result = diagnose(DiagnoseOptions(window_s=0.2, discover=False, nvml=InterruptingNvml(),
                                      bandwidth_budget_s=0.05, read_budget_s=0.1))
    assert result.interrupted
    statuses = {p.name: (p.status, p.reason) for p in result.snapshot.probes}
    assert statuses["server_config"][1] != "interrupted before it finished"   # phase 1 ended before Ctrl-C
    assert statuses["storage"] == (ProbeStatus.ERROR, "interrupted before it finished")
    assert result.report.probes == result.snapshot.probes
    # The interrupted phase's probe threads run on (daemon threads): let them end, so that none of them reads
    # a probe function the next test patches.
    for t in threading.enumerate():
        if t.name.startswith(("probes-", "probe-")):
            t.join(10.0)


def test_network_timings_run_alone_before_the_window(monkeypatch):
    """TTFB in milliseconds must not include waits on triage's own busy probe threads."""
    import triage.probes.cpu_numa
    import triage.probes.network

    events: list[tuple[str, str]] = []

    def fake_network(url, *a, **k):
        events.append(("network", "start"))
        time.sleep(0.05)
        events.append(("network", "end"))
        return ProbeResult("network", ProbeStatus.OK, 0.05, None, {})

    def fake_cpu(*a, **k):
        events.append(("cpu", "start"))
        return ProbeResult("cpu", ProbeStatus.OK, 0.0, None, {})

    monkeypatch.setattr(triage.probes.network, "probe_network", fake_network)
    monkeypatch.setattr(triage.probes.cpu_numa, "probe_cpu", fake_cpu)
    result = diagnose(DiagnoseOptions(url="http://127.0.0.1:9", window_s=0, discover=False,
                                      skip=("storage", "kernel_log", "memory", "gpu")))
    assert events == [("network", "start"), ("network", "end"), ("cpu", "start")]
    assert [p.name for p in result.snapshot.probes][:4] == ["server_config", "engine_identity", "cpu",
                                                             "server_process"]


def test_layer_summary_never_calls_an_unmeasured_layer_clean():
    from triage.diagnose import layer_summary

    result = diagnose(DiagnoseOptions(window_s=0, discover=False, skip=("storage", "kernel_log", "memory")))
    rows = {r["layer"]: r for r in layer_summary(result.report)}
    assert rows["server & config"]["verdict"] == "not checked"          # no server: nothing measured
    assert rows["CPU"]["verdict"] == "no findings (partly checked)"     # cpu ok, server_process unsupported
    out = cli("diagnose", "--no-discover", "--window-s", "0", "--skip", "storage,kernel_log,memory", "-v").output
    assert "By layer:" in out and "not checked" in out


def test_storage_is_not_judged_on_this_host_for_a_server_elsewhere():
    """A remote server's cache is not this host's: storage says so instead of measuring the wrong disk."""
    result = diagnose(DiagnoseOptions(url="http://10.255.255.1:8000", window_s=0, discover=False,
                                      skip=("gpu", "cpu", "memory", "server_metrics", "server_config", "network",
                                            "kernel_log", "logs", "server_process")))
    storage = result.snapshot.get("storage")
    assert storage.status is ProbeStatus.UNSUPPORTED and "--model" in storage.reason
    assert "NET002" not in [f.code for f in result.report.findings]


def test_a_url_that_does_not_answer_exits_2_and_still_writes_the_report(tmp_path):
    import socket

    with socket.socket() as s:          # a free port that nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "dead.json"
    result = cli("diagnose", "--url", f"http://127.0.0.1:{port}", "--window-s", "0", "--skip", "storage,memory",
                 "--json", str(out))
    assert result.exit_code == 2, result.output
    assert f"127.0.0.1:{port} did not answer" in result.output and "Traceback" not in result.output
    report = read_report(out)
    assert {p.name: p.status.value for p in report.probes}["network"] == "error"
