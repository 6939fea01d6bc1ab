"""Three end-to-end scenarios as full diagnose reports: the probes' snapshot, a bench report, and what
the rules make of them. Built from the same healthy host as the rule fixtures (tests/rules_fixtures.py)."""
from __future__ import annotations

import io

from rich.console import Console

from tests.factories import HOST
from tests.rule_cases._build import (
    bench,
    cfg,
    gpu0,
    identity,
    level,
    levels,
    logs,
    metrics,
    process,
    run_config,
    snapshot,
)
from triage import render
from triage.core.bench_data import Slo
from triage.core.probe_data import ServerConfigData, ServerProcessData
from triage.core.report import BenchSection, Report, ReportKind, Target
from triage.core.report_io import dumps
from triage.core.snapshot import Snapshot
from triage.rules import RulesConfig, evaluate

CREATED_AT = "2026-01-01T00:00:00Z"


def _kv_saturated() -> tuple[Snapshot, BenchSection, RulesConfig]:
    """vLLM 0.18 serving a bf16-KV model with a 32K context to 4K-token chat traffic: the KV cache fills at
    c=64, requests queue and are preempted, TTFT p99 misses the chat SLO."""
    snap = snapshot(
        cfg(max_model_len=32768, gpu_memory_utilization=0.8, kv_cache_dtype="auto"),
        metrics("cache_config", cache_dtype="auto", gpu_memory_utilization=0.8),
        metrics(kv_cache_usage_frac=0.97, kv_cache_usage_frac_max=1.0, num_requests_running=41,
                num_requests_waiting=23, num_preemptions_delta=37, preemptions_per_s=7.4),
        metrics("histograms.queue_time_s", mean_s=0.9), metrics("histograms.ttft_s", mean_s=1.2),
        logs(num_preemption_lines=412))
    b = bench(
        run_config(input_len=3584, output_len=512),
        levels(input_tokens_mean=3584.0, output_tokens_mean=512.0),
        level(2, "server", kv_cache_usage_frac_max=0.93, num_requests_waiting_max=3),
        level(3, "server", kv_cache_usage_frac_max=1.0, num_requests_waiting_max=31, num_requests_waiting_mean=22.5,
              num_preemptions_delta=64, server_queue_time_ms_mean=1480.0, server_ttft_ms_mean=1710.0),
        level(3, "ttft_ms", mean=1650.0, std=610.0, min=120.0, p50=1580.0, p90=2400.0, p95=2700.0, p99=3300.0,
              max=3600.0),
        level(3, output_tokens_per_s=2100.0))
    return snap, b, RulesConfig()


def _degraded_pcie() -> tuple[Snapshot, BenchSection, RulesConfig]:
    """An H100 whose link trained at Gen3 x8: under load TTFT p99 misses the SLO and decode runs well below the
    roofline."""
    snap = snapshot(gpu0(pcie_link_gen_current=3, pcie_link_width_current=8, pcie_read_utilization_gpu_pct=82.0,
                         pcie_replay_count=0))
    b = bench(run_config(slo=Slo(ttft_ms=1500, tpot_ms=50)),
              level(0, "tpot_ms", p50=24.0, p99=30.0), level(3, "ttft_ms", p99=3500.0), level(2, "ttft_ms", p99=1900.0))
    return snap, b, RulesConfig(model_weight_bytes=8.5e9)


def _non_batching() -> tuple[Snapshot, BenchSection, RulesConfig]:
    """Ollama behind an OpenAI-compatible endpoint under c=1..64: throughput flat, GPU idle, TTFT climbing."""
    snap = snapshot(
        process(engine="ollama", cmdline=["ollama", "serve"],
                processes=[{"pid": 1234, "name": "ollama", "cpu_pct": 30.0, "num_threads": 20, "rss_bytes": 2 * 2**30},
                           {"pid": 1235, "name": "ollama_llama_server", "cpu_pct": 55.0, "num_threads": 12,
                            "rss_bytes": 6 * 2**30}]),
        identity(engine="ollama", version="0.3.12",
                 evidence=["command line launches ollama", "/api/version answers (Ollama's native API)"]),
        identity("batching", slots=1, evidence=["OLLAMA_NUM_PARALLEL=1"]),
        gpu0(utilization_gpu_pct=24.0, pcie_read_utilization_gpu_pct=24.0, memory_used_bytes=9 * 2**30,
             compute_processes=[{"pid": 1235, "used_memory_bytes": 8 * 2**30, "name": "ollama_llama_server"}]),
        drop=("server_metrics", "server_config", "logs"))
    edits = [run_config(model="llama3.1:8b")]
    for i, (tps, ttft, util) in enumerate([(44.0, 60.0, 22.0), (47.0, 2900.0, 25.0), (48.0, 11800.0, 26.0),
                                           (48.0, 47000.0, 26.0)]):
        edits += [level(i, server=None, output_tokens_per_s=tps), level(i, "ttft_ms", p50=ttft, p99=ttft * 1.3),
                  level(i, "tpot_ms", p50=21.0, p99=24.0), level(i, "gpu", utilization_gpu_pct_mean=util)]
    return snap, bench(*edits), RulesConfig()


SCENARIOS = {"kv_saturated_vllm": _kv_saturated, "degraded_pcie_under_load": _degraded_pcie,
             "non_batching_server": _non_batching}


def build(name: str) -> Report:
    snap, section, config = SCENARIOS[name]()
    result = evaluate(snap, bench=section, config=config)
    cfg = snap.payload(ServerConfigData) or ServerConfigData()
    proc = snap.payload(ServerProcessData) or ServerProcessData()
    target = Target(url="http://127.0.0.1:8000", engine=cfg.engine or proc.engine,
                    engine_version=cfg.engine_version, model=cfg.model or section.config.model)
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
