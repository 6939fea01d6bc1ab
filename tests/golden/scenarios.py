"""Three end-to-end scenarios as full diagnose reports: the probes' snapshot, a bench report, and what
the rules make of them. Built from the same healthy host as the rule fixtures (tests/rules_fixtures.py)."""
from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from tests.factories import HOST
from tests.rules_fixtures import bench, snapshot
from triage import render
from triage.core.probe_data import ServerConfigData, ServerProcessData
from triage.core.report import BenchSection, Report, ReportKind, Target
from triage.core.report_io import dumps, from_dict
from triage.core.snapshot import ProbeResult, Snapshot
from triage.rules import RulesConfig, evaluate

CREATED_AT = "2026-01-01T00:00:00Z"


def _kv_saturated() -> tuple[dict, dict, RulesConfig]:
    """vLLM 0.18 serving a bf16-KV model with a 32K context to 4K-token chat traffic: the KV cache fills at
    c=64, requests queue and are preempted, TTFT p99 misses the chat SLO."""
    snap = snapshot({
        "server_config.max_model_len": 32768, "server_config.gpu_memory_utilization": 0.8,
        "server_config.kv_cache_dtype": "auto", "server_metrics.cache_config.cache_dtype": "auto",
        "server_metrics.cache_config.gpu_memory_utilization": 0.8,
        "server_metrics.kv_cache_usage_frac": 0.97, "server_metrics.kv_cache_usage_frac_max": 1.0,
        "server_metrics.num_requests_running": 41, "server_metrics.num_requests_waiting": 23,
        "server_metrics.num_preemptions_delta": 37, "server_metrics.preemptions_per_s": 7.4,
        "server_metrics.histograms.queue_time_s.mean_s": 0.9, "server_metrics.histograms.ttft_s.mean_s": 1.2,
        "logs.num_preemption_lines": 412,
    })
    b = bench({
        "config.input_len": 3584, "config.output_len": 512,
        **{f"levels.{i}.input_tokens_mean": 3584.0 for i in range(4)},
        **{f"levels.{i}.output_tokens_mean": 512.0 for i in range(4)},
        "levels.2.server.kv_cache_usage_frac_max": 0.93, "levels.2.server.num_requests_waiting_max": 3,
        "levels.3.server.kv_cache_usage_frac_max": 1.0, "levels.3.server.num_requests_waiting_max": 31,
        "levels.3.server.num_requests_waiting_mean": 22.5, "levels.3.server.num_preemptions_delta": 64,
        "levels.3.server.server_queue_time_ms_mean": 1480.0, "levels.3.server.server_ttft_ms_mean": 1710.0,
        "levels.3.ttft_ms": {"mean": 1650.0, "std": 610.0, "min": 120.0, "p50": 1580.0, "p90": 2400.0,
                             "p95": 2700.0, "p99": 3300.0, "max": 3600.0},
        "levels.3.output_tokens_per_s": 2100.0,
    })
    return snap, b, RulesConfig()


def _degraded_pcie() -> tuple[dict, dict, RulesConfig]:
    """An H100 whose link trained at Gen3 x8 (seed 003 case 1): under load TTFT p99 misses the SLO and decode
    runs well below the roofline."""
    g = "gpu.gpus.0."
    snap = snapshot({g + "pcie_link_gen_current": 3, g + "pcie_link_width_current": 8,
                     g + "pcie_read_utilization_gpu_pct": 82.0, g + "pcie_replay_count": 0})
    b = bench({"config.slo": {"ttft_ms": 1500, "tpot_ms": 50},
               "levels.0.tpot_ms.p50": 24.0, "levels.0.tpot_ms.p99": 30.0,
               "levels.3.ttft_ms.p99": 3500.0, "levels.2.ttft_ms.p99": 1900.0})
    return snap, b, RulesConfig(model_weight_bytes=8.5e9)


def _non_batching() -> tuple[dict, dict, RulesConfig]:
    """Ollama behind an OpenAI-compatible endpoint under c=1..64: throughput flat, GPU idle, TTFT climbing."""
    snap = snapshot({
        "server_process.engine": "ollama", "server_process.cmdline": ["ollama", "serve"],
        "engine_identity.engine": "ollama", "engine_identity.version": "0.3.12",
        "engine_identity.evidence": ["command line launches ollama", "/api/version answers (Ollama's native API)"],
        "engine_identity.batching.slots": 1, "engine_identity.batching.evidence": ["OLLAMA_NUM_PARALLEL=1"],
        "server_process.processes": [{"pid": 1234, "name": "ollama", "cpu_pct": 30.0, "num_threads": 20,
                                      "rss_bytes": 2 * 2**30},
                                     {"pid": 1235, "name": "ollama_llama_server", "cpu_pct": 55.0,
                                      "num_threads": 12, "rss_bytes": 6 * 2**30}],
        "gpu.gpus.0.utilization_gpu_pct": 24.0, "gpu.gpus.0.pcie_read_utilization_gpu_pct": 24.0,
        "gpu.gpus.0.memory_used_bytes": 9 * 2**30,
        "gpu.gpus.0.compute_processes": [{"pid": 1235, "used_memory_bytes": 8 * 2**30, "name": "ollama_llama_server"}],
    }, drop=("server_metrics", "server_config", "logs"))
    levels: dict[str, Any] = {}
    for i, (tps, ttft, util) in enumerate([(44.0, 60.0, 22.0), (47.0, 2900.0, 25.0), (48.0, 11800.0, 26.0),
                                           (48.0, 47000.0, 26.0)]):
        levels.update({f"levels.{i}.server": None, f"levels.{i}.output_tokens_per_s": tps,
                       f"levels.{i}.ttft_ms.p50": ttft, f"levels.{i}.ttft_ms.p99": ttft * 1.3,
                       f"levels.{i}.tpot_ms.p50": 21.0, f"levels.{i}.tpot_ms.p99": 24.0,
                       f"levels.{i}.gpu.utilization_gpu_pct_mean": util})
    b = bench({"config.model": "llama3.1:8b", **levels})
    return snap, b, RulesConfig()


SCENARIOS = {"kv_saturated_vllm": _kv_saturated, "degraded_pcie_under_load": _degraded_pcie,
             "non_batching_server": _non_batching}


def build(name: str) -> Report:
    snap_d, bench_d, config = SCENARIOS[name]()
    snap = Snapshot(probes=tuple(from_dict(ProbeResult, p) for p in snap_d["probes"]))
    section = from_dict(BenchSection, bench_d)
    result = evaluate(snap, bench=section, config=config)
    cfg = snap.payload(ServerConfigData) or ServerConfigData()
    proc = snap.payload(ServerProcessData) or ServerProcessData()
    target = Target(url="http://127.0.0.1:8000", engine=cfg.engine or proc.engine,
                    engine_version=cfg.engine_version, model=cfg.model or bench_d["config"].get("model"))
    return Report(kind=ReportKind.DIAGNOSE, triage_version="0.1.0", created_at=CREATED_AT,
                  command=("triage", "diagnose", "--from", f"{name}.snapshot.json", "--bench", f"{name}.bench.json"),
                  host=HOST, target=target, probes=snap.probes, findings=result.findings,
                  skipped_rules=result.skipped, bench=section)


def rendered(report: Report) -> dict[str, str]:
    """The report as the three normalised texts kept under tests/golden/."""
    buf = io.StringIO()
    render.console_view(report, Console(file=buf, width=100, no_color=True, force_terminal=False,
                                        highlight=False, soft_wrap=False))
    return {"json": dumps(report), "md": render.markdown(report), "txt": buf.getvalue()}
