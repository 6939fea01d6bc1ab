"""server_metrics, server_config, network, discovery and server_process probes.

HTTP answers are injected (fixtures/prom texts) or served by a tiny loopback server; the serving
process is a real child process whose command line says `vllm serve ...` and carries planted secrets.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from tests.factories import data_of
from triage.core.snapshot import ProbeStatus
from triage.probes.discovery import classify_cmdline, process_for_port
from triage.probes.http import HttpFailure, HttpResponse, base_url
from triage.probes.network import probe_network
from triage.probes.server_config import parse_flags, parse_human_int, probe_server_config
from triage.probes.server_metrics import probe_server_metrics
from triage.probes.server_process import probe_server_process

PROM = Path(__file__).parent / "fixtures" / "prom"
SECRET_KEY = "sk-planted-secret-0123456789"
SECRET_TOKEN = "hf_plantedSecretToken0123456789"
SECRET_PLAIN = "correct-horse-battery-staple"


def fake_get(routes: dict[str, list[HttpResponse] | HttpResponse | Exception]):
    calls: list[str] = []

    def get(url: str, timeout_s: float) -> HttpResponse:
        calls.append(url)
        path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
        answer = routes.get(path, HttpResponse(404, "not found"))
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    get.calls = calls
    return get


# -- server_metrics ----------------------------------------------------------------------------

def test_server_metrics_window_from_two_scrapes():
    before = HttpResponse(200, (PROM / "vllm_v1_two_engines_before.txt").read_text())
    after = HttpResponse(200, (PROM / "vllm_v1_two_engines_after.txt").read_text())
    get = fake_get({"/metrics": [before, before, after]})
    r = probe_server_metrics("http://10.0.0.5:8000/v1", window_s=10.0, num_intermediate=1, get=get,
                             sleep=lambda s: None)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.url == "http://10.0.0.5:8000/metrics"
    assert d.engine == "vllm" and d.window_s == 10.0
    assert d.num_scrapes == 3
    assert d.preemptions_per_s == pytest.approx(3.0)
    assert d.prefix_cache_hit_rate == pytest.approx(0.25)
    assert d.histograms.ttft_s.count_delta == 100.0


def test_a_failed_in_between_scrape_is_counted_not_fatal():
    before = HttpResponse(200, (PROM / "vllm_v1_two_engines_before.txt").read_text())
    after = HttpResponse(200, (PROM / "vllm_v1_two_engines_after.txt").read_text())
    get = fake_get({"/metrics": [before, HttpFailure("timed out"), after]})
    r = probe_server_metrics("http://10.0.0.5:8000", window_s=10.0, num_intermediate=1, get=get,
                             sleep=lambda s: None)
    assert r.status is ProbeStatus.OK
    assert r.data.num_missed_scrapes == 1 and r.data.num_scrapes == 2
    assert r.data.preemptions_per_s == pytest.approx(3.0)


def test_a_token_only_userinfo_is_redacted_in_probe_data():
    from triage.probes.threaded import ProbeSpec, run_probe

    text = HttpResponse(200, (PROM / "vllm_v1_two_engines_before.txt").read_text())
    get = fake_get({"/metrics": text})
    spec = ProbeSpec("server_metrics", lambda: probe_server_metrics(
        f"http://{SECRET_PLAIN}@10.0.0.5:8000", window_s=0, get=get, sleep=lambda s: None), 5.0)
    r = run_probe(spec)
    assert r.status is ProbeStatus.OK
    assert SECRET_PLAIN not in json.dumps(data_of(r)) and r.data.url == "http://***@10.0.0.5:8000/metrics"


def test_server_metrics_404_is_unsupported_with_advice():
    r = probe_server_metrics("http://h:1", window_s=0, get=fake_get({}), sleep=lambda s: None)
    assert r.status is ProbeStatus.UNSUPPORTED
    assert "--enable-metrics" in r.reason


def test_server_metrics_unreachable_is_error():
    get = fake_get({"/metrics": HttpFailure("http://h:1/metrics: cannot connect (refused)")})
    r = probe_server_metrics("http://h:1", window_s=0, get=get, sleep=lambda s: None)
    assert r.status is ProbeStatus.ERROR and "cannot connect" in r.reason


def test_server_metrics_unknown_engine_is_unsupported():
    get = fake_get({"/metrics": HttpResponse(200, "process_cpu_seconds_total 1.0\n")})
    r = probe_server_metrics("http://h:1", window_s=0, get=get, sleep=lambda s: None)
    assert r.status is ProbeStatus.UNSUPPORTED


def test_no_url_means_unsupported():
    assert probe_server_metrics(None).status is ProbeStatus.UNSUPPORTED
    assert probe_network(None).status is ProbeStatus.UNSUPPORTED


# -- server_config -----------------------------------------------------------------------------

VLLM_ARGV = ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct",
             "--max-model-len", "32k", "--gpu-memory-utilization=0.95", "--max-num-seqs", "512",
             "--enable-chunked-prefill", "--no-enable-prefix-caching", "-tp", "2", "--kv-cache-dtype", "fp8",
             "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}',
             "--api-key", SECRET_PLAIN, "--enforce-eager"]


def test_parse_vllm_flags_typed():
    cfg, bad = parse_flags(VLLM_ARGV, "vllm")
    assert bad == []
    assert cfg["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert cfg["max_model_len"] == 32000        # vLLM: k = 1000, K = 1024
    assert cfg["gpu_memory_utilization"] == 0.95
    assert cfg["max_num_seqs"] == 512
    assert cfg["enable_chunked_prefill"] is True
    assert cfg["enable_prefix_caching"] is False
    assert cfg["tensor_parallel_size"] == 2
    assert cfg["kv_cache_dtype"] == "fp8"
    assert cfg["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 4}
    assert cfg["enforce_eager"] is True


def test_parse_sglang_and_tgi_flags():
    cfg, _ = parse_flags(["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2-7B",
                          "--mem-fraction-static", "0.8", "--chunked-prefill-size", "-1", "--tp-size", "4",
                          "--disable-radix-cache", "--context-length", "8192"], "sglang")
    assert cfg == {"model": "Qwen/Qwen2-7B", "gpu_memory_utilization": 0.8,
                   "tensor_parallel_size": 4, "enable_prefix_caching": False, "max_model_len": 8192,
                   "enable_chunked_prefill": False}
    cfg, _ = parse_flags(["text-generation-launcher", "--model-id", "bigscience/bloom", "--num-shard", "8",
                          "--quantize", "awq", "--max-total-tokens", "4096"], "tgi")
    assert cfg == {"model": "bigscience/bloom", "tensor_parallel_size": 8, "quantization": "awq",
                   "max_model_len": 4096}


def test_parse_bad_value_is_listed_not_fatal():
    cfg, bad = parse_flags(["vllm", "serve", "m", "--max-num-seqs", "lots"], "vllm")
    assert "max_num_seqs" not in cfg and bad == ["--max-num-seqs"]


def test_parse_human_int():
    assert parse_human_int("32k") == 32000 and parse_human_int("32K") == 32768 and parse_human_int("4096") == 4096


def test_server_config_merges_sources_and_redacts():
    get = fake_get({
        "/metrics": HttpResponse(200, (PROM / "vllm_v0_preempting.txt").read_text()),
        "/v1/models": HttpResponse(200, json.dumps({"data": [{"id": "llama", "root": "meta-llama/Llama-2-7b-hf",
                                                              "max_model_len": 4096}]})),
        "/version": HttpResponse(200, json.dumps({"version": "0.6.3"})),
    })
    r = probe_server_config("http://127.0.0.1:8000", cmdline=VLLM_ARGV, engine="vllm", get=get)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.engine == "vllm" and d.engine_version == "0.6.3"
    assert d.metrics_engine == "vllm-v0"
    # The running engine's own report wins over the command line.
    assert d.max_model_len == 4096 and d.sources["max_model_len"] == "/v1/models"
    assert d.gpu_memory_utilization == 0.95 and d.sources["gpu_memory_utilization"] == "cache_config_info"
    assert d.kv_cache_dtype == "fp8" and d.sources["kv_cache_dtype"] == "cache_config_info"
    assert d.block_size == 16
    assert d.max_num_seqs == 512 and d.sources["max_num_seqs"] == "cmdline"
    assert d.pipeline_parallel_size == 1 and d.sources["pipeline_parallel_size"] == "default"
    assert d.served_model_name == "llama"
    assert SECRET_PLAIN not in json.dumps(d.to_dict())


def test_server_config_of_a_remote_reference_server():
    get = fake_get({
        "/metrics": HttpResponse(200, (PROM / "reference_engine_tiny_after_4_requests.txt").read_text()),
        "/v1/models": HttpResponse(200, json.dumps({"data": [{"id": "tiny", "root": "tiny", "max_model_len": 1024}]})),
        "/version": HttpResponse(200, json.dumps({"version": "0.1.0", "engine": "triage-reference"})),
    })
    d = probe_server_config("http://10.9.8.7:8000", get=get).data
    assert d.engine == "reference" and d.engine_version == "0.1.0"
    assert d.max_model_len == 1024 and d.block_size == 16
    assert d.enable_prefix_caching is True and d.sources["enable_prefix_caching"] == "cache_config_info"


def test_server_config_without_anything_is_unsupported():
    get = fake_get({"/metrics": HttpFailure("refused")})
    r = probe_server_config("http://127.0.0.1:9", get=get)
    assert r.status is ProbeStatus.UNSUPPORTED and "refused" in r.reason


def test_base_url():
    assert base_url("localhost:8000/v1/") == "http://localhost:8000"
    assert base_url("https://h/prefix/metrics") == "https://h/prefix"


# -- network against a real loopback server --------------------------------------------------

class _Health(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = b"ok" if self.path == "/health" else b"no"
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def health_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_network_probe_measures_loopback(health_server):
    r = probe_network(health_server + "/v1", num_samples=3)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.same_host is True and d.num_samples == 3
    assert d.tcp_connect_ms_p50 is not None and d.tcp_connect_ms_p50 >= 0
    assert d.health_ttfb_ms_p50 is not None and d.health_ttfb_ms_p50 >= d.tcp_connect_ms_p50 * 0
    assert d.health_status_code == 200


def test_network_probe_refused_port_is_error(health_server):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = probe_network(f"http://127.0.0.1:{port}", num_samples=2)
    assert r.status is ProbeStatus.ERROR and "refused" in r.reason.lower()


# -- discovery and server_process on a real child process -----------------------------------

FAKE_SERVER = """
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)
"""


@pytest.fixture
def fake_vllm():
    env = {**os.environ, "HF_TOKEN": SECRET_TOKEN, "OPENAI_API_KEY": SECRET_KEY, "CUDA_LAUNCH_BLOCKING": "1",
           "HF_HOME": "/data/hf", "CUDA_INJECTION64_PATH": "/opt/nsight/libinject.so", "NSIGHT_CUDA_DEBUGGER": "1",
           "CUDA_PROFILE": "1", "NCCL_DEBUG": "INFO", "UNRELATED_VAR": "x"}
    argv = [sys.executable, "-c", FAKE_SERVER, "vllm", "serve", "/models/llama", "--max-num-seqs", "64",
            "--api-key", SECRET_PLAIN, f"--hf-token={SECRET_TOKEN}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait(5)


def test_classify_cmdlines():
    assert classify_cmdline(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"]) == "vllm"
    assert classify_cmdline(["/venv/bin/vllm", "serve", "x"]) == "vllm"
    assert classify_cmdline(["python3", "-m", "sglang.launch_server", "--model-path", "x"]) == "sglang"
    assert classify_cmdline(["text-generation-launcher", "--model-id", "x"]) == "tgi"
    assert classify_cmdline([sys.executable, "-m", "triage", "serve", "--port", "0"]) == "reference"
    assert classify_cmdline(["/usr/local/bin/triage", "serve"]) == "reference"
    assert classify_cmdline(["python", "/srv/vllm/train.py"]) is None
    assert classify_cmdline(["VLLM::EngineCore"]) is None


def test_port_to_process_and_secrets_never_leak(fake_vllm):
    proc, port = fake_vllm
    found = process_for_port(port)
    assert found is not None and found.pid == proc.pid and found.engine == "vllm"
    started = psutil.Process(proc.pid).create_time()
    r = probe_server_process(found.pid, found.engine, window_s=0.2, clock=lambda: started + 7200.0)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.pid == proc.pid
    assert d.uptime_s == 7200.0
    assert d.debug_env == {"CUDA_LAUNCH_BLOCKING": "1", "CUDA_INJECTION64_PATH": "/opt/nsight/libinject.so",
                              "NSIGHT_CUDA_DEBUGGER": "1", "CUDA_PROFILE": "1", "NCCL_DEBUG": "INFO"}
    assert d.hf_home == "/data/hf"
    assert d.processes[0].rss_bytes > 0
    assert d.cpu_affinity
    text = json.dumps(d.to_dict())
    for secret in (SECRET_KEY, SECRET_TOKEN, SECRET_PLAIN):
        assert secret not in text
    assert "--api-key" in d.cmdline


def test_probe_captures_every_variable_gpu011_judges():
    from triage.probes.server_process import DEBUG_ENV
    from triage.rules.catalog.gpu011_bad_cuda_env import _DEBUG_ENV
    assert set(_DEBUG_ENV) <= set(DEBUG_ENV)


def test_uptime_from_a_clock_behind_the_start_is_unknown_not_negative(fake_vllm):
    proc, _ = fake_vllm
    r = probe_server_process(proc.pid, window_s=0, clock=lambda: 0.0)
    assert r.data.uptime_s is None and "uptime_s" in r.data.unsupported_fields


def test_server_process_without_pid_is_unsupported():
    assert probe_server_process(None).status is ProbeStatus.UNSUPPORTED


def test_server_process_gone_is_error():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(5)
    time.sleep(0.05)
    assert probe_server_process(proc.pid, window_s=0).status is ProbeStatus.ERROR


def test_server_process_uses_the_argv_and_env_it_is_given():
    r = probe_server_process(os.getpid(), window_s=0, argv=["vllm", "serve", "m", "--api-key", SECRET_PLAIN],
                             env={"NCCL_DEBUG": "INFO", "HF_TOKEN": SECRET_TOKEN})
    assert r.status is ProbeStatus.OK
    assert r.data.cmdline == ("vllm", "serve", "m", "--api-key", "***")
    assert r.data.debug_env == {"NCCL_DEBUG": "INFO"}
    assert SECRET_TOKEN not in json.dumps(data_of(r))


def test_sglang_takes_a_unique_prefix_of_a_flag_as_its_parser_does():
    """SGLang's argparse keeps allow_abbrev on (claim sglang.argparse-abbreviations): `--tp 2` is `--tp-size 2`,
    the form its own docs and users write. An ambiguous prefix, or an engine whose parser does not, stays unread."""
    cfg, bad = parse_flags(["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2",
                            "--mem-frac=0.8"], "sglang")
    assert cfg["tensor_parallel_size"] == 2 and cfg["gpu_memory_utilization"] == 0.8 and not bad
    cfg, _ = parse_flags(["python", "-m", "sglang.launch_server", "--model-path", "m", "--m", "x"], "sglang")
    assert set(cfg) == {"model"}
    cfg, _ = parse_flags(["vllm", "serve", "m", "--max-num", "8"], "vllm")
    assert "max_num_seqs" not in cfg
