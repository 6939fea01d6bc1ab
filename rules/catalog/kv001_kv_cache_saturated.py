"""KV001 (kv-cache-saturated): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/KV001/."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from triage.core.probe_data import LogsData, ServerMetricsData
from triage.core.report import BenchLevel, Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._kv_sched_shared import kv_relief
from triage.rules.context import Context, level_label, metrics_kv_usage
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import pct
from triage.rules.registry import rule


def _most_ranks_full(metrics: ServerMetricsData, limit: float) -> bool:
    """Under data parallelism the usage is the fullest rank's: one full rank of several is an imbalance
    (TOPO001), not a KV cache too small for the load."""
    full = [r for r in metrics.ranks if (r.kv_cache_usage_frac_max or 0) >= limit]
    return not metrics.ranks or 2 * len(full) >= len(metrics.ranks)


def _from_log_stats(logs: LogsData, limit: float, min_wait: float, evidence: dict[str, Any]) -> tuple[bool, float]:
    """(measured, peak usage) from the server log's periodic stats lines (vLLM's 'GPU KV cache usage', SGLang's
    'token usage' with '#queue-req'), read where no live server was: the moments usage and queue were high
    together."""
    samples = [s for s in logs.stats if s.kv_cache_usage_frac is not None and s.num_requests_waiting is not None]
    full = [s for s in samples if s.kv_cache_usage_frac >= limit and s.num_requests_waiting >= min_wait]
    if full:
        worst = max(full, key=lambda s: (s.kv_cache_usage_frac, s.num_requests_waiting))
        evidence.update({"logs.stats.kv_cache_usage_frac_max": worst.kv_cache_usage_frac,
                         "logs.stats.num_requests_waiting_at_max": worst.num_requests_waiting,
                         "logs.stats.at": f"{logs.path}:L{worst.line_no}",
                         "logs.stats.num_full_samples": len(full), "logs.stats.num_samples": len(samples)})
    return bool(samples), max((s.kv_cache_usage_frac for s in full), default=0.0)


@rule("KV001", "kv-cache-saturated", Severity.HIGH, ("server_metrics|bench|logs",), RuleDoc(
    what="Requests wait while the KV cache is the limit: usage >= 0.90, or less free KV than one typical "
         "request needs. Free KV is (1 - usage) x capacity in tokens (capacity: cache_config num_gpu_blocks x "
         "block_size, SGLang's max_total_num_tokens, or the server log); a typical request is a bench level's "
         "input_tokens_mean + output_tokens_mean. The free-room trigger is likely; it is confirmed when, at "
         "the level's mean usage with requests waiting, not even one typical prompt fits. With no live server, the "
         "server log's stats lines (usage and waiting requests together) are judged the same way.",
    why="When the KV cache is full the scheduler cannot admit more sequences: requests queue while the GPU "
        "could batch more, so TTFT grows with load even though compute is not saturated ('Why Your LLM Inference Is Slow (And How to Fix It)', 'No KV Cache Optimization (PagedAttention)'). A small "
        "cache is full long before 90%: a waiting request is admitted only when blocks for its tokens are free, "
        "so a 640-token cache at 75% cannot take a 464-token request (an explainer of inference as a memory-bound problem, 'watching the real ceiling').",
    example="server_metrics.kv_cache_usage_frac_max = 0.99, server_metrics.num_requests_waiting = 14; or "
            "bench.c16.server.kv_cache_usage_frac_max = 0.77, bench.c16.server.num_requests_waiting_max = 15, "
            "server_metrics.cache_config.num_gpu_blocks*block_size = 640 (tokens), "
            "derived.bench.c16.kv_free_tokens = 147, bench.c16.input_tokens_mean+output_tokens_mean = 464 (tokens)",
    fix="Give the KV cache more room: `--gpu-memory-utilization 0.92`, a `--max-model-len` sized to the "
        "traffic, `--kv-cache-dtype fp8` on Ada, Hopper or Blackwell, or more tensor parallelism; first remove a "
        "hand-set block count (`--num-gpu-blocks-override`), which overrides all of these.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'No KV Cache Optimization (PagedAttention)' and the 'Quick Reference: If You See X, Try Y' table (requests queuing but GPU not saturated: KV cache full)",
                "an explainer of inference as a memory-bound problem, 'watching the real ceiling' (the KV cache is the real ceiling; vLLM admits requests until it fills)",
                "claim:vllm.kv-cache-usage-perc", "claim:vllm.cache-config-info", "claim:sglang.token-usage",
                "claim:sglang.max-total-num-tokens", "claim:tgi.batch-current-max-tokens",
                "claim:tgi.batch-max-total-tokens", "claim:vllm.gpu-memory-utilization-0.92",
                "claim:vllm.num-gpu-blocks-override", "claim:vllm.kv-cache-dtype-fp8", "claim:vllm.fp8-from-sm89"),
), thresholds=("KV001.kv_usage_frac", "KV001.min_waiting", "KV001.min_free_requests",
               "KV001.gpu_memory_utilization_target"))
def kv001(ctx: Context) -> Hit | None:
    found = _Saturation()
    room = _RoomCheck.build(ctx)
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if metrics is not None:
        _from_metrics(ctx, metrics, room, found)
    if ctx.bench is not None:
        _from_levels(ctx, room, found)
    if not found.seen:
        found.seen, found.peak = _from_log_stats(ctx.seen(LogsData), ctx.th("KV001.kv_usage_frac"),
                                                 ctx.th("KV001.min_waiting"), found.evidence)
    if not found.seen:
        raise MissingInput("KV cache usage and the waiting queue were not measured (no server_metrics from a live /metrics, and no "
                           "stats lines in a server log)")
    if not found.evidence and not found.no_room:
        return None
    return _saturated(ctx, found)


@dataclass(slots=True)
class _Saturation:
    """What KV001 gathers: whether usage and queue were measured together, the evidence of a full cache (usage
    at the limit with requests waiting) and its peak, and the moments too little KV was free to admit a request."""
    seen: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    peak: float = 0.0
    no_room: list[_NoRoom] = field(default_factory=list)

    def full(self, usage: float, evidence: dict[str, Any]) -> None:
        self.evidence.update(evidence)
        self.peak = max(self.peak, usage)

    def add(self, no_room: _NoRoom | None) -> None:
        if no_room is not None:
            self.no_room.append(no_room)


def _from_metrics(ctx: Context, metrics: ServerMetricsData, room: _RoomCheck | None, found: _Saturation) -> None:
    """The live /metrics window: its peak usage with the queue (its peak when that is larger)."""
    limit, min_wait = ctx.th("KV001.kv_usage_frac"), ctx.th("KV001.min_waiting")
    usage, usage_key = metrics_kv_usage(metrics)
    waiting, waiting_key = metrics.num_requests_waiting, "server_metrics.num_requests_waiting"
    peak_waiting = metrics.num_requests_waiting_max
    if peak_waiting is not None and (waiting is None or peak_waiting > waiting):
        waiting, waiting_key = peak_waiting, "server_metrics.num_requests_waiting_max"
    if usage is None or waiting is None:
        return
    found.seen = True
    if usage >= limit and waiting >= min_wait and _most_ranks_full(metrics, limit):
        found.full(usage, {usage_key: usage, waiting_key: waiting})
    elif room is not None:
        # The last scrape's usage and queue, read together: the snapshot's typical moment.
        last = _Sample(metrics.kv_cache_usage_frac, "server_metrics.kv_cache_usage_frac",
                       metrics.num_requests_waiting, "server_metrics.num_requests_waiting")
        found.add(room.check("server_metrics", _Sample(usage, usage_key, waiting, waiting_key), last, room.smallest))


def _from_levels(ctx: Context, room: _RoomCheck | None, found: _Saturation) -> None:
    """Each bench level's peak usage and queue, with its means as the typical moment."""
    limit, min_wait = ctx.th("KV001.kv_usage_frac"), ctx.th("KV001.min_waiting")
    for lv, s in ctx.level_server():
        usage, waiting = s.kv_cache_usage_frac_max, s.num_requests_waiting_max
        if usage is None or waiting is None:
            continue
        found.seen = True
        p = level_label(lv)
        if usage >= limit and waiting >= min_wait:
            evidence: dict[str, Any] = {f"{p}.server.kv_cache_usage_frac_max": usage,
                                        f"{p}.server.num_requests_waiting_max": waiting}
            if s.num_requests_waiting_mean is not None:
                evidence[f"{p}.server.num_requests_waiting_mean"] = s.num_requests_waiting_mean
            found.full(usage, evidence)
        elif room is not None and (request := _request_of(lv)) is not None:
            found.add(room.check(p, _Sample(usage, f"{p}.server.kv_cache_usage_frac_max", waiting,
                                            f"{p}.server.num_requests_waiting_max"),
                                 _Sample(s.kv_cache_usage_frac_mean, f"{p}.server.kv_cache_usage_frac_mean",
                                         s.num_requests_waiting_mean, f"{p}.server.num_requests_waiting_mean"),
                                 request))


def _saturated(ctx: Context, found: _Saturation) -> Hit:
    evidence = found.evidence
    certainty = Certainty.CONFIRMED
    if evidence:
        message = (f"KV cache usage reached {pct(found.peak)} with requests waiting: the scheduler cannot admit more "
                   "sequences, so new requests queue.")
    else:
        worst = min(found.no_room, key=lambda n: n.free_tokens / n.request_tokens)
        message = (f"Requests waited while only {worst.free_tokens:.0f} of the KV cache's "
                   f"{worst.capacity_tokens:.0f} tokens were free (usage {pct(worst.usage)} at {worst.where}), "
                   f"less than one typical request needs ({worst.request_tokens:.0f} tokens): the cache, not "
                   "compute, limits admission although usage stayed below "
                   f"{pct(ctx.th('KV001.kv_usage_frac'))}.")
        if not any(n.certain for n in found.no_room):
            certainty = Certainty.LIKELY
    for n in found.no_room:
        evidence.update(n.evidence)
    engine = ctx.engine()
    knobs, why = kv_relief(ctx, engine, evidence)
    cmds, note = engine_flags(knobs, engine)
    text = ("Give the KV cache more room: " + "; ".join(why) + "." if why else
            "The memory share, context cap and KV dtype are already tuned: add tensor parallelism or replicas.")
    return Hit(
        title="The KV cache is full and requests are queueing",
        message=message, evidence=evidence, certainty=certainty, impact=0.8,
        fix=Fix(text + note, cmds),
    )


@dataclass(frozen=True, slots=True)
class _Request:
    """A typical request of the bench traffic: its prompt and prompt+output in tokens, and where from."""
    prompt_tokens: float
    prompt_source: str
    total_tokens: float
    total_source: str


def _request_of(lv: BenchLevel) -> _Request | None:
    if not lv.input_tokens_mean or lv.output_tokens_mean is None:
        return None
    p = level_label(lv)
    return _Request(lv.input_tokens_mean, f"{p}.input_tokens_mean",
                    lv.input_tokens_mean + lv.output_tokens_mean, f"{p}.input_tokens_mean+output_tokens_mean")


@dataclass(frozen=True, slots=True)
class _Sample:
    """KV usage and queue length read together, with their evidence keys."""
    usage: float | None
    usage_key: str
    waiting: float | None
    waiting_key: str


@dataclass(frozen=True, slots=True)
class _NoRoom:
    where: str
    usage: float
    capacity_tokens: float
    free_tokens: float
    request_tokens: float
    certain: bool
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _RoomCheck:
    """KV001's second trigger: is the free KV smaller than what one typical waiting request needs?"""
    capacity_tokens: float
    capacity_source: str
    min_free_requests: float
    min_waiting: float
    smallest: _Request            # the bench's smallest typical request (judges the snapshot's metrics)

    @staticmethod
    def build(ctx: Context) -> _RoomCheck | None:
        """None when the KV capacity or the bench's request sizes are unknown: only the usage trigger applies."""
        try:
            capacity, source = ctx.kv_capacity_tokens()
        except MissingInput:
            return None
        if capacity <= 0 or ctx.bench is None:
            return None
        requests = [r for r in (_request_of(lv) for lv in ctx.bench.levels if lv.client.valid) if r is not None]
        if not requests:
            return None
        return _RoomCheck(capacity, source, ctx.th("KV001.min_free_requests"), ctx.th("KV001.min_waiting"),
                          min(requests, key=lambda r: r.total_tokens))

    def check(self, where: str, peak: _Sample, typical: _Sample, request: _Request) -> _NoRoom | None:
        """Likely when, at peak usage with requests waiting, the free KV holds fewer than min_free_requests
        typical requests (prompt + output). Confirmed when also at the typical moment (the level's means, or
        the snapshot's last scrape) requests waited and not even one typical prompt fit: the scheduler
        admits a waiting request only once blocks for its prompt are free."""
        if peak.usage is None or peak.waiting is None or peak.waiting < self.min_waiting:
            return None
        free = max(0.0, 1.0 - peak.usage) * self.capacity_tokens
        if free >= self.min_free_requests * request.total_tokens:
            return None
        evidence: dict[str, Any] = {peak.usage_key: peak.usage, peak.waiting_key: peak.waiting,
                                    self.capacity_source: self.capacity_tokens,
                                    f"derived.{where}.kv_free_tokens": round(free, 1),
                                    request.total_source: request.total_tokens}
        certain = False
        if typical.usage is not None and typical.waiting is not None and typical.waiting >= self.min_waiting:
            free_typical = max(0.0, 1.0 - typical.usage) * self.capacity_tokens
            if free_typical < request.prompt_tokens:
                certain = True
                evidence.update({typical.usage_key: typical.usage, typical.waiting_key: typical.waiting,
                                 f"derived.{where}.kv_free_tokens_typical": round(free_typical, 1),
                                 request.prompt_source: request.prompt_tokens})
        return _NoRoom(where, peak.usage, self.capacity_tokens, free, request.total_tokens, certain, evidence)
