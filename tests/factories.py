"""Small builders for reports in tests. Values are explicit so each test states what it checks."""
from __future__ import annotations

import numpy as np

from triage.core.bench_data import BenchRunConfig
from triage.core.report import (
    BenchLevel,
    BenchSection,
    ClientStats,
    HostInfo,
    LatencyStats,
    Report,
    ReportKind,
    RequestCounts,
    Target,
)

HOST = HostInfo(hostname="test-host", os="Linux 6.1", python="3.11.7", cpu_model="Test CPU",
                num_cpus=2, memory_total_bytes=24 * 2**30, gpus=())


def stats_of(values) -> LatencyStats:
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return LatencyStats(None, None, None, None, None, None, None, None)
    p = np.percentile(a, [50, 90, 95, 99])
    return LatencyStats(float(a.mean()), float(a.std()), float(a.min()), float(p[0]), float(p[1]),
                        float(p[2]), float(p[3]), float(a.max()))


def level(concurrency: int, ttft_ms, tpot_ms, e2e_ms, output_tokens_per_s: float,
          samples: bool = True, failed: int = 0) -> BenchLevel:
    n = len(ttft_ms)
    return BenchLevel(
        concurrency=concurrency, request_rate=None, duration_s=10.0,
        requests=RequestCounts(completed=n, failed=failed, errors_by_kind={"http_500": failed} if failed else {}),
        ttft_ms=stats_of(ttft_ms), tpot_ms=stats_of(tpot_ms), itl_ms=stats_of(tpot_ms), e2e_ms=stats_of(e2e_ms),
        output_tokens_per_s=output_tokens_per_s, total_tokens_per_s=output_tokens_per_s * 3,
        requests_per_s=n / 10.0, goodput_requests_per_s=None, slo_attainment_pct=None,
        input_tokens_mean=512.0, output_tokens_mean=128.0,
        client=ClientStats(cpu_pct=20.0, event_loop_lag_ms_p99=1.0, achieved_concurrency=float(concurrency),
                           valid=True),
        samples={"ttft_ms": list(map(float, ttft_ms)), "tpot_ms": list(map(float, tpot_ms)),
                 "e2e_ms": list(map(float, e2e_ms))} if samples else None,
    )


def bench_report(levels, model: str = "tiny") -> Report:
    return Report(
        kind=ReportKind.BENCH, triage_version="0.1.0", created_at="2026-11-21T12:00:00Z",
        command=("triage", "bench"), host=HOST,
        target=Target(url="http://127.0.0.1:8000", engine="reference", engine_version="0.1.0", model=model),
        bench=BenchSection(config=BenchRunConfig(endpoint="completions"), levels=tuple(levels)),
    )


def data_of(result) -> dict:
    """A probe result's payload as the report writes it (a plain dict; {} when it measured nothing)."""
    from triage.core.convert import to_dict

    return to_dict(result.data) if result.data is not None else {}


def fix_lines(fix) -> tuple[str, ...]:
    """Every command and flag a fix prints."""
    return fix.commands + fix.flags


def offers(fix, setting: str) -> bool:
    """Whether a fix sets `setting` (`--max-model-len 512`): as a flag, or within a complete command."""
    return setting in fix.flags or any(setting in c for c in fix.commands)
