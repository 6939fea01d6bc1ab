"""Engines named from what they say about themselves: real llama.cpp and transformers-serve captures,
source-shaped fixtures for Ollama, TGI, LMDeploy and TensorRT-LLM, and the live reference server."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.probes.batching_config import read_batching
from triage.probes.discovery import classify_cmdline
from triage.probes.engine_identity import HttpSignals, fetch_signals, identify
from triage.probes.http import HttpFailure, HttpResponse
from triage.probes.llamacpp import parse, read_slots
from triage.probes.prom import normalise, parse_metrics

FIX = Path(__file__).parent / "fixtures"
LCPP = FIX / "llamacpp"
ENG = FIX / "engines"


def _capture(name: str) -> HttpResponse:
    """A raw HTTP capture (status line, headers, blank line, body) as the probes' HttpResponse."""
    head, _, body = (LCPP / name).read_text().partition("\n\n")
    lines = head.splitlines()
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return HttpResponse(int(lines[0].split()[1]), body, headers)


def _server(routes: dict[str, HttpResponse]):
    def get(url: str, timeout_s: float) -> HttpResponse:
        path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
        if path not in routes:
            raise HttpFailure(f"{url}: cannot connect")
        return routes[path]
    return get


def test_llamacpp_named_from_its_header_props_and_metrics():
    health = _capture("health_with_headers.txt")
    routes = {"/props": HttpResponse(200, (LCPP / "props_parallel1.json").read_text(), health.headers),
              "/v1/models": HttpResponse(200, (LCPP / "v1_models.json").read_text(), health.headers)}
    sig = fetch_signals("http://127.0.0.1:8104", _server(routes))
    names = parse_metrics((LCPP / "metrics_parallel1_idle.txt").read_text()).names()
    who = identify(None, sig, names)
    assert who.engine == "llama.cpp"
    assert who.version == "b0-unknown"
    assert "Server: llama.cpp" in who.evidence and any("total_slots" in e for e in who.evidence)


def test_llamacpp_metrics_fill_the_engine_neutral_window():
    idle = normalise(parse_metrics((LCPP / "metrics_parallel1_idle.txt").read_text()))
    busy = normalise(parse_metrics((LCPP / "metrics_parallel1_under_load.txt").read_text()))
    assert idle.engine == busy.engine == "llama.cpp"
    assert idle.num_requests_waiting == 0 and idle.num_requests_running == 0
    assert busy.num_requests_running == 1 and busy.num_requests_waiting >= 1   # deferred: one slot, more clients
    assert busy.generation_tokens_total == 424
    assert busy.prefix_cache_hits_total == 94 and busy.prefix_cache_queries_total == 94 + 29
    assert busy.batch_occupancy_mean == 1


def test_llamacpp_props_and_slots():
    got = parse(json.loads((LCPP / "props_parallel1.json").read_text()),
                json.loads((LCPP / "slots_parallel1_under_load.json").read_text()))
    assert (got.total_slots, got.busy_slots, got.ctx_per_slot_tokens) == (1, 1, 2048)
    assert got.build_info == "b0-unknown" and got.model_alias == "tiny-llama"
    routes = {"/props": HttpResponse(200, (LCPP / "props_parallel1.json").read_text())}
    assert read_slots("http://h:1", _server(routes)).total_slots == 1
    assert read_slots("http://h:1", _server({})) is None


@pytest.mark.parametrize("props, slots", [(None, None), ([], "x"), ({"total_slots": 1e300}, [1, 2]),
                                          ({"total_slots": float("nan"), "build_info": 7}, [{"is_processing": "y"}])])
def test_llamacpp_parse_is_total(props, slots):
    got = parse(props, slots)
    assert got.total_slots is None or 1 <= got.total_slots <= 65536


def test_transformers_serve_named_from_its_routes():
    spec = json.loads((ENG / "transformers_openapi_paths.json").read_text())
    who = identify(None, HttpSignals({"/openapi.json": spec}, "uvicorn"))
    assert who.engine == "transformers"


def test_ollama_and_tgi_from_their_version_endpoints():
    ollama = identify(None, HttpSignals({"/api/version": json.loads((ENG / "ollama_api_version.json").read_text())}))
    assert (ollama.engine, ollama.version) == ("ollama", "0.12.6")
    tgi = identify(None, HttpSignals({"/info": json.loads((ENG / "tgi_info.json").read_text())}))
    assert (tgi.engine, tgi.version) == ("tgi", "3.3.6")


@pytest.mark.parametrize("fixture, engine, running, waiting, kv", [
    ("lmdeploy_metrics.txt", "lmdeploy", 12, 3, 0.41), ("trtllm_metrics.txt", "trtllm", 8, 0, 0.22)])
def test_lmdeploy_and_trtllm_metrics(fixture, engine, running, waiting, kv):
    sample = parse_metrics((ENG / fixture).read_text())
    m = normalise(sample)
    assert (m.engine, m.num_requests_running, m.num_requests_waiting, m.kv_cache_usage_frac) == (
        engine, running, waiting, kv)
    assert identify(None, None, sample.names()).engine == engine


def test_command_line_wins_and_nothing_is_nothing():
    assert identify("vllm", HttpSignals({"/api/version": {"version": "1"}})).engine == "vllm"
    assert identify(None, HttpSignals()).engine is None


@pytest.mark.parametrize("argv, engine", [
    (["transformers", "serve", "Qwen/Qwen3-0.6B"], "transformers"),
    (["/usr/bin/lmdeploy", "serve", "api_server", "m"], "lmdeploy"),
    (["trtllm-serve", "m", "--backend", "pytorch"], "trtllm"),
    (["./llama-server", "-m", "x.gguf", "-np", "1"], "llama.cpp"),
])
def test_new_engines_on_the_command_line(argv, engine):
    assert classify_cmdline(argv) == engine


def test_batching_knobs_from_argv_and_env():
    one = read_batching("llama.cpp", ["llama-server", "-m", "x.gguf", "--parallel", "1", "-c", "2048"], {})
    assert (one.slots, one.ctx_tokens) == (1, 2048)
    assert read_batching("llama.cpp", ["llama-server", "-np=4"], {}).slots == 4
    assert read_batching("llama.cpp", ["llama-server"], {"LLAMA_ARG_N_PARALLEL": "2"}).slots == 2
    assert read_batching("llama.cpp", ["llama-server", "-np", "-1"], {}).slots is None      # auto
    assert read_batching("llama.cpp", ["llama-server", "-nocb"], {}).continuous is False
    ollama = read_batching("ollama", ["ollama", "serve"], {"OLLAMA_NUM_PARALLEL": "1", "OLLAMA_MAX_QUEUE": "64"})
    assert (ollama.slots, ollama.max_queue) == (1, 64)
    assert read_batching("transformers", ["transformers", "serve"], {}).continuous is False
    assert read_batching("transformers", ["transformers", "serve", "--continuous-batching"], {}).continuous is True


def test_reference_server_names_itself(reference_server):
    who = identify(None, fetch_signals(reference_server.url))
    assert who.engine == "reference" and who.version


def test_live_transformers_serve_is_named(transformers_server):
    """A real `transformers serve`: named from its own /openapi.json, and from its command line."""
    who = identify(None, fetch_signals(transformers_server.url))
    assert who.engine == "transformers", who
    assert classify_cmdline(list(transformers_server.argv)) == "transformers"


@pytest.mark.slow
def test_live_transformers_serve_under_load_is_named_as_not_batching(transformers_server, tmp_path):
    """The issue's live case: `transformers serve` at c=1,4. triage bench measures it, triage diagnose
    --bench names the engine and says it does not batch, with the engine's own flag in the fix, and
    SCHED003 does not lead with "add replicas"."""
    import subprocess
    import sys

    bench_json, diag_json = tmp_path / "bench.json", tmp_path / "diagnose.json"
    run = [sys.executable, "-m", "triage"]
    b = subprocess.run(run + ["bench", "--url", transformers_server.url, "--model", transformers_server.model,
                              "--concurrency", "1,4", "--num-requests", "16", "--input-len", "16",
                              "--output-len", "24", "--endpoint", "chat", "--json", str(bench_json),
                              "--format", "json"], capture_output=True, text=True, timeout=300)
    assert b.returncode in (0, 1), b.stderr[-2000:]
    d = subprocess.run(run + ["diagnose", "--url", transformers_server.url, "--bench", str(bench_json),
                              "--window-s", "0.5", "--skip", "storage,kernel_log,memory,gpu", "--json",
                              str(diag_json), "--format", "json"], capture_output=True, text=True, timeout=300)
    assert d.returncode in (0, 1), d.stderr[-2000:]
    report = json.loads(diag_json.read_text())
    assert report["target"]["engine"] == "transformers"
    by = {f["code"]: f for f in report["findings"]}
    assert "ENG001" in by, [f["code"] for f in report["findings"]]
    eng = by["ENG001"]
    assert "transformers" in eng["title"] and "does not batch" in eng["title"]
    assert any("--continuous-batching" in c for c in eng["fix"]["commands"] + eng["fix"].get("flags", []))
    if "SCHED003" in by:
        assert "add replicas" not in by["SCHED003"]["fix"]["text"].split(";")[0]
