"""Per-level metrics from per-request records, exactly as ../shared/design/contract.md defines them.

TTFT and E2E per request; TPOT = (E2E - TTFT) / (output_tokens - 1) per request with more than one output
token; ITL = gaps between consecutive content chunks, pooled across requests, a k-token chunk's gap split
evenly over its k tokens; throughput over the level's duration (first send to last completion); goodput
counts failed requests as misses. Percentiles are numpy's linear interpolation.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec
from triage.core.bench_data import LevelGpu, LevelServer
from triage.core.metric_names import LATENCY_FAMILIES, LATENCY_STATS, THROUGHPUT_METRICS, repeat_key
from triage.core.report import BenchLevel, ClientStats, LatencyStats, RequestCounts

EMPTY_STATS = LatencyStats(None, None, None, None, None, None, None, None)


def latency_stats(values: list[float] | np.ndarray) -> LatencyStats:
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return EMPTY_STATS
    p50, p90, p95, p99 = np.percentile(a, [50, 90, 95, 99])
    return LatencyStats(mean=float(a.mean()), std=float(a.std()), min=float(a.min()), p50=float(p50),
                        p90=float(p90), p95=float(p95), p99=float(p99), max=float(a.max()))


def tpot_s(r: RequestRecord) -> float | None:
    if r.ttft_s is None or r.e2e_s is None or r.output_tokens is None or r.output_tokens <= 1:
        return None
    return (r.e2e_s - r.ttft_s) / (r.output_tokens - 1)


@dataclass(slots=True)
class ItlResult:
    values_ms: list[float] = field(default_factory=list)
    num_split_by_usage: int = 0  # requests whose multi-token chunks were split with per-chunk usage
    num_split_by_mean: int = 0  # requests with more tokens than chunks but no per-chunk usage


MAX_TOKENS_PER_CHUNK = 4096


def itl_ms(records: list[RequestRecord]) -> ItlResult:
    out = ItlResult()
    for r in records:
        times = r.chunk_times_s
        if len(times) < 2:
            continue
        gaps = np.diff(np.asarray(times, dtype=float)) * 1000.0
        if r.chunk_tokens is not None and len(r.chunk_tokens) == len(times):
            tokens = r.chunk_tokens[1:]
            if any(k > 1 for k in tokens):
                out.num_split_by_usage += 1
            for gap, k in zip(gaps.tolist(), tokens, strict=True):
                # A chunk's usage delta is bounded by what any server streams in one chunk; beyond that (or
                # negative) the server's usage is not believable and the gap counts as one token.
                k = k if isinstance(k, int) and 1 <= k <= MAX_TOKENS_PER_CHUNK else 1
                out.values_ms.extend([gap / k] * k)
        elif r.output_tokens is not None and r.output_tokens_source == "usage" and r.output_tokens > len(times):
            # Tokens per chunk unknown, total known: divide every gap by the mean tokens per later chunk.
            per_chunk = (r.output_tokens - 1) / (len(times) - 1)
            out.num_split_by_mean += 1
            out.values_ms.extend((gaps / per_chunk).tolist())
        else:
            out.values_ms.extend(gaps.tolist())
    return out


def meets_slo(r: RequestRecord, slo: dict[str, float]) -> bool:
    """A failed request never meets the SLO. A one-token request has no TPOT and is not judged on it."""
    if not r.ok or r.e2e_s is None:
        return False
    if r.ttft_s is None:
        # Completed with no text: the first token came before the end, so e2e bounds the unknown TTFT. Judged
        # on e2e alone; a TTFT objective is met only when the whole response beat it.
        if not r.no_text:
            return False
        limits = [slo[k] for k in ("ttft_ms", "e2e_ms") if k in slo]
        return all(r.e2e_s * 1000.0 <= limit for limit in limits)
    if "ttft_ms" in slo and r.ttft_s * 1000.0 > slo["ttft_ms"]:
        return False
    if "e2e_ms" in slo and r.e2e_s * 1000.0 > slo["e2e_ms"]:
        return False
    tpot = tpot_s(r)
    return not ("tpot_ms" in slo and tpot is not None and tpot * 1000.0 > slo["tpot_ms"])


def duration_s(records: list[RequestRecord]) -> float:
    """First send to last completion (failures included: they held the server too)."""
    starts = [r.t0_s for r in records]
    ends = [r.t0_s + (r.end_s if r.end_s is not None else (r.e2e_s or 0.0)) for r in records]
    if not starts:
        return 0.0
    return max(0.0, max(ends) - min(starts))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize(spec: LevelSpec, records: list[RequestRecord], slo: dict[str, float] | None,
              client: ClientStats, server: LevelServer | None = None, gpu: LevelGpu | None = None,
              notes: tuple[str, ...] = (), keep_samples: bool = True,
              duration_override_s: float | None = None) -> BenchLevel:
    """One BenchLevel from the level's measured (non-warmup) records. With --repeat, the runner passes the
    sum of the repeats' durations so that the pauses between repeats do not count."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    failed = [r for r in measured if not r.ok]
    dur = duration_override_s if duration_override_s is not None else duration_s(measured)
    ttft = [r.ttft_s * 1000.0 for r in ok if r.ttft_s is not None]
    e2e = [r.e2e_s * 1000.0 for r in ok if r.e2e_s is not None]
    tpot = [t * 1000.0 for t in (tpot_s(r) for r in ok) if t is not None]
    itl = itl_ms(ok)
    out_tokens = [r.output_tokens for r in ok if r.output_tokens is not None]
    in_tokens = [r.input_tokens for r in ok if r.input_tokens is not None]
    sum_out = float(sum(out_tokens))
    have_inputs = len(in_tokens) == len(ok) and ok
    per_s = (lambda x: x / dur) if dur > 0 else (lambda x: None)

    notes_list = list(notes)
    by_chunks = sum(1 for r in ok if r.output_tokens_source == "chunks")
    if by_chunks:
        notes_list.append(f"output tokens of {by_chunks}/{len(ok)} requests were counted from content chunks: "
                          "the server sent no usage.completion_tokens")
    bad_usage = sum(1 for r in ok if r.output_tokens_source == "chunks_bad_usage")
    if bad_usage:
        notes_list.append(f"usage: {bad_usage} requests reported a negative, non-integer or absurd "
                          "usage.completion_tokens; their tokens were counted from the chunks instead")
    if itl.num_split_by_usage:
        notes_list.append(f"ITL: {itl.num_split_by_usage} requests had multi-token chunks; each gap was split "
                          "evenly over its tokens using per-chunk usage")
    if itl.num_split_by_mean:
        notes_list.append(f"ITL: {itl.num_split_by_mean} requests carried more tokens than chunks without "
                          "per-chunk usage; each gap was divided by the request's mean tokens per chunk")
    reasoning = sum(r.num_reasoning_chunks for r in ok)
    if reasoning:
        notes_list.append(f"{reasoning} reasoning chunks were counted as content (TTFT includes them)")
    no_text = sum(1 for r in ok if r.no_text)
    if no_text:
        notes_list.append(f"{no_text}/{len(ok)} requests completed with no text: the server reported generated "
                          "tokens (usage) but streamed no printable text. They count as served, with no TTFT or "
                          "ITL. Many of them suggest reasoning output the client does not see, or a max_tokens "
                          "too small for the answer")
    short = sum(1 for r in ok if r.output_tokens is not None and r.requested_output_tokens
                and r.output_tokens < r.requested_output_tokens)
    if short:
        notes_list.append(f"{short}/{len(ok)} requests returned fewer tokens than asked "
                          "(the server may ignore ignore_eos/min_tokens)")

    goodput = attainment = None
    if slo:
        met = sum(1 for r in measured if meets_slo(r, slo))
        goodput = per_s(float(met))
        attainment = 100.0 * met / len(measured) if measured else None

    return BenchLevel(
        concurrency=spec.concurrency, request_rate=spec.request_rate, duration_s=dur,
        requests=RequestCounts(completed=len(ok), failed=len(failed),
                               errors_by_kind=dict(Counter(r.error_kind for r in failed if r.error_kind)),
                               completed_no_text=no_text),
        ttft_ms=latency_stats(ttft), tpot_ms=latency_stats(tpot), itl_ms=latency_stats(itl.values_ms),
        e2e_ms=latency_stats(e2e),
        output_tokens_per_s=per_s(sum_out),
        total_tokens_per_s=per_s(sum_out + sum(in_tokens)) if have_inputs else None,
        requests_per_s=per_s(float(len(ok))),
        goodput_requests_per_s=goodput, slo_attainment_pct=attainment,
        input_tokens_mean=_mean(in_tokens), output_tokens_mean=_mean(out_tokens),
        client=client, server=server, gpu=gpu,
        samples={"ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": e2e} if keep_samples else None,
        notes=tuple(notes_list), input_len=spec.input_len,
    )


def repeat_summary(level: BenchLevel) -> dict[str, float | None]:
    """One repeat's numbers, which `compare` uses to judge noise: every metric compare knows, keyed as compare
    looks it up (repeat_key: ttft_ms.p99 -> ttft_ms_p99)."""
    out: dict[str, float | None] = {repeat_key(m): getattr(level, m) for m in THROUGHPUT_METRICS}
    for family in LATENCY_FAMILIES:
        for stat in LATENCY_STATS:
            out[repeat_key(f"{family}.{stat}")] = getattr(getattr(level, family), stat)
    return out
