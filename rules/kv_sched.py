"""KV cache and scheduler rules (probes: server_metrics, server_config, logs; bench levels)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from triage.core.probe_data import HistogramWindow, ServerConfigData, ServerMetricsData
from triage.core.report import BenchLevel, Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label, metrics_kv_usage
from triage.rules.engines import DISABLING_FLAGS, EngineInfo, engine_flags
from triage.rules.fmt import ms, pct, pow2_at_least, round_up
from triage.rules.registry import rule


def _kv003_context_cap(ctx: Context, observed_tokens: float) -> int:
    """KV003's proposed max_model_len: the longest observed prompt+output with headroom, to a multiple of 256."""
    return round_up(observed_tokens * ctx.th("KV003.headroom_ratio"), 256)


def _kv_relief(ctx: Context, engine: EngineInfo,
               evidence: dict[str, Any] | None = None) -> tuple[dict[str, object], list[str]]:
    """The knobs that give the KV cache more room, with values from the evidence, and why each.
    The settings the values were computed from are added to `evidence`."""
    knobs: dict[str, object] = {}
    why: list[str] = []
    evidence = evidence if evidence is not None else {}
    target = ctx.th("KV001.gpu_memory_utilization_target")
    pinned, pinned_src = ctx.setting(None, "num_gpu_blocks_override")
    if pinned is not None and pinned_src is not None:
        # The block count is fixed by hand: the memory share and the KV dtype no longer size the cache.
        evidence[pinned_src] = pinned
        why.append(f"remove the block-count override that pins the cache at {pinned} blocks whatever the memory "
                   "share (vLLM `--num-gpu-blocks-override`, the reference engine's `--num-kv-blocks`), or raise it")
    util, util_src = ctx.setting("gpu_memory_utilization", "gpu_memory_utilization")
    if util_src is not None:
        evidence[util_src] = util
    if pinned is None and (util is None or util < target):
        knobs["gpu_memory_utilization"] = f"{target:.2f}"
        why.append(f"raise the memory share for KV to {target:.2f}" + (f" (now {util})" if util is not None else ""))
    max_len = ctx.seen(ServerConfigData).max_model_len
    try:
        observed, where = ctx.observed_max_total_tokens()
    except MissingInput:
        observed = None
    if max_len is not None and observed is not None:
        proposed = _kv003_context_cap(ctx, observed)
        if proposed < max_len:
            evidence["server_config.max_model_len"] = max_len
            evidence[where] = observed
            knobs["max_model_len"] = proposed
            why.append(f"cap the context at {proposed} tokens (the bench's longest prompt+output, {observed:.0f}, "
                       f"x {ctx.th('KV003.headroom_ratio')}; check that production's p99 is no longer), "
                       f"down from {max_len}")
    dtype, dtype_src = ctx.setting("kv_cache_dtype", "cache_dtype")
    try:
        cc = ctx.compute_capability()
    except MissingInput:
        cc = None
    if pinned is None and cc is not None and cc >= (9, 0) and str(dtype or "auto").lower() in _SIXTEEN_BIT_KV:
        evidence[dtype_src or "server_config.kv_cache_dtype"] = dtype
        evidence["gpu.compute_capability"] = list(cc)
        knobs["kv_cache_dtype_fp8"] = None
        why.append("store the KV cache in FP8 (half the bytes per token)")
    return knobs, why


_SIXTEEN_BIT_KV = frozenset({"auto", "fp16", "bf16", "float16", "bfloat16", "half"})


# ------------------------------------------------------------------------------------------------
@rule("KV001", "kv-cache-saturated", Severity.HIGH, ("server_metrics|bench",), RuleDoc(
    what="Requests wait while the KV cache is the limit: usage >= 0.90, or less free KV than one typical "
         "request needs. Free KV is (1 - usage) x capacity in tokens (capacity: cache_config num_gpu_blocks x "
         "block_size, SGLang's max_total_num_tokens, or the server log); a typical request is a bench level's "
         "input_tokens_mean + output_tokens_mean. The free-room trigger is likely; it is confirmed when, at "
         "the level's mean usage with requests waiting, not even one typical prompt fits.",
    why="When the KV cache is full the scheduler cannot admit more sequences: requests queue while the GPU "
        "could batch more, so TTFT grows with load even though compute is not saturated (seed 000 §2). A small "
        "cache is full long before 90%: a waiting request is admitted only when blocks for its tokens are free, "
        "so a 640-token cache at 75% cannot take a 464-token request (seed 004 §12).",
    example="server_metrics.kv_cache_usage_frac_max = 0.99, server_metrics.num_requests_waiting = 14; or "
            "bench.c16.server.kv_cache_usage_frac_max = 0.77, bench.c16.server.num_requests_waiting_max = 15, "
            "server_metrics.cache_config.num_gpu_blocks*block_size = 640 (tokens), "
            "derived.bench.c16.kv_free_tokens = 147, bench.c16.input_tokens_mean+output_tokens_mean = 464 (tokens)",
    fix="Give the KV cache more room: `--gpu-memory-utilization 0.92`, a `--max-model-len` sized to the "
        "traffic, `--kv-cache-dtype fp8` on Hopper/Blackwell, or more tensor parallelism; first remove a "
        "hand-set block count (`--num-gpu-blocks-override`), which overrides all of these.",
    references=("seed 000 §2 and quick reference (requests queuing but GPU not saturated: KV cache full)",
                "seed 004 §12 (the KV cache is the real ceiling; vLLM admits requests until it fills)",
                "vLLM metric vllm:kv_cache_usage_perc"),
), thresholds=("KV001.kv_usage_frac", "KV001.min_waiting", "KV001.min_free_requests",
               "KV001.gpu_memory_utilization_target"))
def kv001(ctx: Context) -> Hit | None:
    limit, min_wait = ctx.th("KV001.kv_usage_frac"), ctx.th("KV001.min_waiting")
    evidence: dict[str, Any] = {}
    seen = False
    peak = 0.0
    no_room: list[_NoRoom] = []
    room = _RoomCheck.build(ctx)
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if metrics is not None:
        usage, usage_key = metrics_kv_usage(metrics)
        waiting, waiting_key = metrics.num_requests_waiting, "server_metrics.num_requests_waiting"
        peak_waiting = metrics.num_requests_waiting_max
        if peak_waiting is not None and (waiting is None or peak_waiting > waiting):
            waiting, waiting_key = peak_waiting, "server_metrics.num_requests_waiting_max"
        if usage is not None and waiting is not None:
            seen = True
            if usage >= limit and waiting >= min_wait:
                evidence[usage_key] = usage
                evidence[waiting_key] = waiting
                peak = max(peak, usage)
            elif room is not None:
                # The last scrape's usage and queue, read together: the snapshot's typical moment.
                last = _Sample(metrics.kv_cache_usage_frac, "server_metrics.kv_cache_usage_frac",
                               metrics.num_requests_waiting, "server_metrics.num_requests_waiting")
                hit = room.check("server_metrics", _Sample(usage, usage_key, waiting, waiting_key), last,
                                 room.smallest)
                if hit is not None:
                    no_room.append(hit)
    for lv, s in (ctx.level_server() if ctx.bench is not None else ()):
        usage, waiting = s.get("kv_cache_usage_frac_max"), s.get("num_requests_waiting_max")
        if usage is None or waiting is None:
            continue
        seen = True
        p = level_label(lv)
        if usage >= limit and waiting >= min_wait:
            evidence[f"{p}.server.kv_cache_usage_frac_max"] = usage
            evidence[f"{p}.server.num_requests_waiting_max"] = waiting
            if s.get("num_requests_waiting_mean") is not None:
                evidence[f"{p}.server.num_requests_waiting_mean"] = s["num_requests_waiting_mean"]
            peak = max(peak, usage)
        elif room is not None and (request := _request_of(lv)) is not None:
            hit = room.check(p, _Sample(usage, f"{p}.server.kv_cache_usage_frac_max", waiting,
                                        f"{p}.server.num_requests_waiting_max"),
                             _Sample(s.get("kv_cache_usage_frac_mean"), f"{p}.server.kv_cache_usage_frac_mean",
                                     s.get("num_requests_waiting_mean"), f"{p}.server.num_requests_waiting_mean"),
                             request)
            if hit is not None:
                no_room.append(hit)
    if not seen:
        raise MissingInput("KV cache usage and the waiting queue were not measured (no server /metrics)")
    if not evidence and not no_room:
        return None
    certainty = Certainty.CONFIRMED
    if evidence:
        message = (f"KV cache usage reached {pct(peak)} with requests waiting: the scheduler cannot admit more "
                   "sequences, so new requests queue.")
    else:
        worst = min(no_room, key=lambda n: n.free_tokens / n.request_tokens)
        message = (f"Requests waited while only {worst.free_tokens:.0f} of the KV cache's "
                   f"{worst.capacity_tokens:.0f} tokens were free (usage {pct(worst.usage)} at {worst.where}), "
                   f"less than one typical request needs ({worst.request_tokens:.0f} tokens): the cache, not "
                   "compute, limits admission although usage stayed below "
                   f"{pct(limit)}.")
        if not any(n.certain for n in no_room):
            certainty = Certainty.LIKELY
    for n in no_room:
        evidence.update(n.evidence)
    engine = ctx.engine()
    knobs, why = _kv_relief(ctx, engine, evidence)
    cmds, note = engine_flags(knobs, engine.name)
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


# ------------------------------------------------------------------------------------------------
@rule("KV002", "preemptions", Severity.HIGH, ("server_metrics|bench",), RuleDoc(
    what="The engine's preemption counter grew during the window (a count that did not grow is history, "
         "not a current problem).",
    why="A preempted sequence loses its KV blocks and is recomputed when it resumes: sustained preemption "
        "roughly doubles latency (seed 004 §12), and in seed 003 case 2 it came with a 30% throughput loss.",
    example="server_metrics.num_preemptions_delta = 37, server_metrics.preemptions_per_s = 1.2",
    fix="Everything KV001 suggests, and a lower `--max-num-seqs` / `--max-num-batched-tokens` so the batch "
        "fits the cache.",
    references=("seed 003 case 2 (Preempted ... sequences warnings)", "seed 004 §12 (preemption: the cliff)",
                "vLLM metric vllm:num_preemptions_total"),
), thresholds=("KV001.gpu_memory_utilization_target",))
def kv002(ctx: Context) -> Hit | None:
    evidence: dict[str, Any] = {}
    seen = False
    total = 0.0
    running_peak = None
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if metrics is not None and metrics.num_preemptions_delta is not None:
        seen = True
        if metrics.num_preemptions_delta > 0:
            evidence["server_metrics.num_preemptions_delta"] = metrics.num_preemptions_delta
            evidence["server_metrics.preemptions_per_s"] = metrics.preemptions_per_s
            evidence["server_metrics.window_s"] = metrics.window_s
            total += metrics.num_preemptions_delta
            running_peak = metrics.num_requests_running
    for lv, s in (ctx.level_server() if ctx.bench is not None else ()):
        if s.get("num_preemptions_delta") is None:
            continue
        seen = True
        if s["num_preemptions_delta"] > 0:
            evidence[f"{level_label(lv)}.server.num_preemptions_delta"] = s["num_preemptions_delta"]
            total += s["num_preemptions_delta"]
            if s.get("num_requests_running_max") is not None:
                running_peak = max(running_peak or 0, s["num_requests_running_max"])
    if not seen:
        raise MissingInput("the preemption counter was not measured over a window (no server /metrics)")
    if not evidence:
        return None
    engine = ctx.engine()
    knobs, why = _kv_relief(ctx, engine, evidence)
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    if running_peak:
        lower = max(1, int(running_peak * 0.75))
        if seqs is None or lower < seqs:
            knobs["max_num_seqs"] = lower
            why.append(f"admit fewer sequences at once ({lower}, 3/4 of the {running_peak:.0f} that ran at the peak)")
    cmds, note = engine_flags(knobs, engine.name)
    return Hit(
        title="The engine is preempting requests",
        message=f"{total:.0f} preemption(s) during the window: sequences are evicted from the KV cache and "
                "recomputed, which roughly doubles their latency.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.85,
        fix=Fix("Make the batch fit the KV cache: " + "; ".join(why) + "." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("KV003", "max-model-len-oversized", Severity.MEDIUM, ("server_config", "bench"), RuleDoc(
    what="`max_model_len` is >= 4x the longest observed prompt+output while the server is KV-limited.",
    why="With paged KV (vLLM, SGLang) an oversized limit costs nothing by itself; it costs when it admits a "
        "few very long requests, each holding thousands of KV blocks while dozens of normal ones queue or are "
        "preempted. Engines that budget per request up front (TGI's --max-total-tokens) reserve room for the "
        "limit on every request. A limit sized to the traffic bounds both (seed 000 §2).",
    example="server_config.max_model_len = 32768, bench.c16.input_tokens_mean+output_tokens_mean = 4096, "
            "server_metrics.kv_cache_usage_frac_max = 0.98",
    fix="`--max-model-len <observed p99 x 1.25>`, rounded up to 256 (e.g. 5120 for 4096-token requests).",
    references=("seed 000 §2 (reduce --max-model-len if contexts are shorter)",
                "seed 000 quick reference (requests queuing: reduce --max-model-len)"),
), thresholds=("KV003.oversize_ratio", "KV003.headroom_ratio", "common.kv_limited_usage_frac"))
def kv003(ctx: Context) -> Hit | None:
    max_len = ctx.measured(ctx.need(ServerConfigData).max_model_len, "server_config.max_model_len")
    observed, where = ctx.observed_max_total_tokens()
    if max_len < ctx.th("KV003.oversize_ratio") * observed:
        return None
    limited, kv_evidence = ctx.kv_pressure()
    if not limited:
        return None
    proposed = _kv003_context_cap(ctx, observed)
    cmds, note = engine_flags({"max_model_len": proposed}, ctx.engine().name)
    return Hit(
        title="max_model_len is far larger than the traffic needs",
        message=f"max_model_len is {max_len} tokens, {max_len / observed:.0f}x the longest observed request "
                f"({observed:.0f} tokens), while the KV cache is the limit.",
        evidence={"server_config.max_model_len": max_len, where: observed, **kv_evidence,
                  "derived.proposed_max_model_len_tokens": proposed},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix(f"Cap the context at {proposed} tokens (observed {observed:.0f} x {ctx.th('KV003.headroom_ratio')}, "
                "rounded up to 256); requests longer than that will be rejected, so check your real p99 first."
                + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("KV004", "kv-cache-fp16-on-fp8-hardware", Severity.MEDIUM, ("server_config|server_metrics", "gpu"), RuleDoc(
    what="The server is KV-limited on a Hopper or Blackwell GPU (compute capability >= 9.0) while the KV "
         "cache is stored in 16 bits (cache dtype auto/fp16/bf16).",
    why="FP8 KV halves the bytes per token, which doubles the sequences the cache holds, with < 0.5% quality "
        "loss on these GPUs (seed 004 §5).",
    example="server_config.kv_cache_dtype = 'auto', gpu.gpus[0].compute_capability = [9, 0], "
            "server_metrics.num_preemptions_delta = 12",
    fix="`--kv-cache-dtype fp8` (SGLang `--kv-cache-dtype fp8_e4m3`, TGI `--kv-cache-dtype fp8_e4m3fn`).",
    references=("seed 000 §2 (--kv-cache-dtype fp8 on H100/Blackwell)", "seed 004 §5 (KV cache quantization)"),
), thresholds=("common.kv_limited_usage_frac",))
def kv004(ctx: Context) -> Hit | None:
    dtype, source = ctx.setting("kv_cache_dtype", "cache_dtype")
    if dtype is None:
        raise MissingInput("the KV cache dtype was not measured (server_config.kv_cache_dtype, cache_config)")
    cc = ctx.compute_capability()
    if cc < (9, 0) or str(dtype).lower() not in _SIXTEEN_BIT_KV:
        return None
    limited, kv_evidence = ctx.kv_pressure()
    if not limited:
        return None
    cmds, note = engine_flags({"kv_cache_dtype_fp8": None}, ctx.engine().name)
    return Hit(
        title="A 16-bit KV cache on FP8-capable hardware is the limit",
        message=f"The KV cache is full and stored in 16 bits (kv_cache_dtype={dtype}) on a compute-capability "
                f"{cc[0]}.{cc[1]} GPU, which could store it in FP8 at half the size.",
        evidence={source: dtype, "gpu.compute_capability": list(cc), **kv_evidence},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix("Store the KV cache in FP8: it doubles the sequences that fit." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("KV005", "prefix-cache-ineffective", Severity.MEDIUM, ("server_config|server_metrics|bench",), RuleDoc(
    what="Prefix caching is disabled, or its hit rate is < 10% while the prompts share a prefix of >= 256 "
         "tokens. Version-aware: on engines that enable it by default (vLLM V1 >= 0.8, SGLang, TGI >= 3) the "
         "advice is to remove the flag that turned it off, never to 'enable' it.",
    why="Without reuse every request recomputes the shared system prompt's KV: thousands of tokens of "
        "duplicate prefill on each TTFT (seed 002: ~80 ms saved per request with a 400-token prompt).",
    example="bench.config.shared_prefix_len = 1024, bench.c8.server.prefix_cache_hit_rate = 0.02",
    fix="Turn prefix caching on (or stop turning it off), and put the shared system prompt first, "
        "byte-identical across requests.",
    references=("seed 002 step 2 (prefix caching is critical for shared system prompts)",
                "seed 004 §7.4 (automatic prefix caching)"),
), thresholds=("KV005.min_hit_rate_frac", "KV005.min_shared_prefix_tokens"))
def kv005(ctx: Context) -> Hit | None:
    engine = ctx.engine()
    enabled, where = ctx.setting("enable_prefix_caching", "enable_prefix_caching")
    if enabled is None or ctx.cfg_source("enable_prefix_caching") == "default":
        default = engine.default_on("prefix_caching")  # version-aware: what this engine does when not told
        if default is not None:
            enabled, where = default, f"default for {engine.label}"
    shared = ctx.bench.config.get("shared_prefix_len") if ctx.bench is not None else None
    min_shared = ctx.th("KV005.min_shared_prefix_tokens")
    evidence: dict[str, Any] = {}
    if shared is not None:
        evidence["bench.config.shared_prefix_len"] = shared
    if enabled is False:
        evidence[where] = False
        default_on = engine.default_on("prefix_caching")
        off_flag = DISABLING_FLAGS["prefix_caching"].get(engine.name or "")
        if default_on and off_flag:
            text = f"Remove `{off_flag}`: {engine.label} caches prefixes by default."
            cmds: tuple[str, ...] = ()
        else:
            cmds, note = engine_flags({"enable_prefix_caching": None}, engine.name)
            text = "Enable automatic prefix caching." + note
        matters = shared is not None and shared >= min_shared
        return Hit(
            title="Prefix caching is turned off",
            message="Prefix caching is disabled, so every request recomputes any prefix it shares with others"
                    + (f" (this traffic shares {shared} tokens)." if matters else "."),
            evidence=evidence, severity=Severity.MEDIUM if matters else Severity.LOW,
            certainty=Certainty.CONFIRMED if matters else Certainty.POSSIBLE, impact=0.4 if matters else 0.1,
            fix=Fix(text + " Put the shared system prompt first, identical across requests.", cmds),
        )
    # Prefix caching is on (or unknown): judge its hit rate where the traffic shares a prefix.
    if shared is None:
        raise MissingInput("prefix caching is not off, and whether the prompts share a prefix is unknown "
                           "(bench.config.shared_prefix_len)")
    if shared < min_shared:
        return None
    rates = []
    for lv, s in ctx.level_server():
        if s.get("prefix_cache_hit_rate") is not None:
            rates.append((lv, s["prefix_cache_hit_rate"]))
    if not rates:
        raise MissingInput("the prefix cache hit rate was not measured during the bench")
    low = [(lv, r) for lv, r in rates if r < ctx.th("KV005.min_hit_rate_frac")]
    if not low:
        return None
    for lv, r in low:
        evidence[f"{level_label(lv)}.server.prefix_cache_hit_rate"] = r
    return Hit(
        title="The prefix cache rarely hits although prompts share a prefix",
        message=f"Prompts share a {shared}-token prefix but the prefix cache hit rate stays at "
                f"{pct(min(r for _, r in low))}: something before the shared part differs between requests.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.4,
        fix=Fix("Put the shared system prompt (and few-shot examples) first, byte-identical across requests; move "
                "anything that varies (timestamps, user ids, request ids) after it. Check that the cache is not "
                "evicted by KV pressure (KV001).", ()),
    )


# ------------------------------------------------------------------------------------------------
@rule("KV006", "gpu-memory-utilization-low", Severity.MEDIUM, ("server_config|server_metrics",), RuleDoc(
    what="`gpu_memory_utilization` is below 0.85 while the server is KV-limited.",
    why="vLLM gives the KV cache what is left of `gpu_memory_utilization` x VRAM after weights and "
        "activations; on an 80 GB GPU, 0.80 instead of 0.92 leaves ~9.6 GB unused, about 73K tokens of KV for "
        "a Llama-3.1-8B (128 KiB per token in 16 bits).",
    example="server_config.gpu_memory_utilization = 0.7, server_metrics.kv_cache_usage_frac_max = 0.97, "
            "server_metrics.num_requests_waiting = 9",
    fix="`--gpu-memory-utilization 0.92` (0.90 if other processes share the GPU); SGLang "
        "`--mem-fraction-static`, TGI `--cuda-memory-fraction`.",
    references=("seed 000 §2 (tune --gpu-memory-utilization 0.92)", "seed 003 configuration layer (0.92)"),
), thresholds=("KV006.min_gpu_memory_utilization", "KV001.gpu_memory_utilization_target"))
def kv006(ctx: Context) -> Hit | None:
    util, where = ctx.setting("gpu_memory_utilization", "gpu_memory_utilization")
    if util is None:
        raise MissingInput("gpu_memory_utilization was not measured (server_config or cache_config)")
    if util >= ctx.th("KV006.min_gpu_memory_utilization"):
        return None
    limited, kv_evidence = ctx.kv_pressure()
    if not limited:
        return None
    target = ctx.th("KV001.gpu_memory_utilization_target")
    cmds, note = engine_flags({"gpu_memory_utilization": f"{target:.2f}"}, ctx.engine().name)
    return Hit(
        title="The KV cache is starved by a low gpu_memory_utilization",
        message=f"gpu_memory_utilization is {util}, leaving {pct(target - util)} of VRAM unused while the KV "
                "cache is the limit.",
        evidence={where: util, **kv_evidence}, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix(f"Raise it to {target:.2f} (0.90 if another process shares the GPU)." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
def _long_prompt_levels(ctx: Context) -> list[BenchLevel]:
    long_tokens = ctx.th("SCHED001.long_prompt_tokens")
    return [lv for lv in ctx.levels() if (lv.input_tokens_mean or 0) >= long_tokens]


@rule("SCHED001", "chunked-prefill-off", Severity.MEDIUM, ("server_config|bench",), RuleDoc(
    what="Chunked prefill is disabled, or TPOT p99 spikes to >= 3x its p50 when long prompts (>= 2K tokens) "
         "arrive. Version-aware: vLLM V1 (>= 0.8), SGLang and TGI >= 3 chunk by default, so there the fix is "
         "to tune the chunk size or remove the flag that disabled it.",
    why="Without chunking, one long prefill occupies a whole engine step and every decoding request in the "
        "batch waits for it: token streams stutter (seed 004 §7.3, 'prefill piracy').",
    example="server_config.enable_chunked_prefill = false, bench.c16.tpot_ms.p99 = 180, bench.c16.tpot_ms.p50 = 32",
    fix="`--enable-chunked-prefill` on engines where it is off by default, and a smaller "
        "`--max-num-batched-tokens` (e.g. 2048) so prefill chunks interleave with decode.",
    references=("seed 004 §7.3 (chunked prefill)", "seed 003 configuration layer (missing chunked prefill)"),
), thresholds=("SCHED001.tpot_spike_ratio", "SCHED001.long_prompt_tokens"))
def sched001(ctx: Context) -> Hit | None:
    engine = ctx.engine()
    enabled = ctx.seen(ServerConfigData).enable_chunked_prefill
    source = ctx.cfg_source("enable_chunked_prefill")
    if enabled is None or source == "default":
        default = engine.default_on("chunked_prefill")  # version-aware: what this engine does when not told
        if default is not None:
            enabled = default
    evidence: dict[str, Any] = {}
    if enabled is False:
        evidence["server_config.enable_chunked_prefill"] = False
        default_on = engine.default_on("chunked_prefill")
        off_flag = DISABLING_FLAGS["chunked_prefill"].get(engine.name or "")
        if default_on and off_flag:
            text, cmds = f"Remove `{off_flag}`: {engine.label} chunks prefills by default.", ()
        else:
            cmds, note = engine_flags({"enable_chunked_prefill": None}, engine.name)
            text = "Enable chunked prefill so long prompts are split and interleaved with decode." + note
        return Hit(
            title="Chunked prefill is off",
            message="Chunked prefill is disabled: each long prompt's prefill stalls every decoding request.",
            evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.4, fix=Fix(text, cmds),
        )
    if ctx.bench is None:
        if enabled is None:
            raise MissingInput("whether chunked prefill is on is unknown (server_config.enable_chunked_prefill "
                               "and the engine version were not measured), and there is no bench to judge TPOT")
        raise MissingInput("chunked prefill is on; judging TPOT spikes under long prompts needs a bench report")
    spikes = []
    for lv in _long_prompt_levels(ctx):
        p50, p99 = lv.tpot_ms.p50, lv.tpot_ms.p99
        if p50 and p99 is not None and p99 >= ctx.th("SCHED001.tpot_spike_ratio") * p50:
            spikes.append(lv)
    if not _long_prompt_levels(ctx):
        raise MissingInput(f"no bench level had prompts of >= {ctx.th('SCHED001.long_prompt_tokens'):.0f} tokens")
    if not spikes:
        return None
    for lv in spikes:
        p = level_label(lv)
        evidence[f"{p}.tpot_ms.p99"] = lv.tpot_ms.p99
        evidence[f"{p}.tpot_ms.p50"] = lv.tpot_ms.p50
        evidence[f"{p}.input_tokens_mean"] = lv.input_tokens_mean
    batched = ctx.seen(ServerConfigData).max_num_batched_tokens
    proposed = 2048 if batched is None or batched > 2048 else max(512, int(batched) // 2)
    cmds, note = engine_flags({"max_num_batched_tokens": proposed}, engine.name)
    if enabled:
        text = (f"Chunked prefill is already on ({engine.label}); make the chunks smaller so decode steps "
                f"interleave more often: max_num_batched_tokens {batched or 'default'} -> {proposed}.")
    else:
        cmds_on, _ = engine_flags({"enable_chunked_prefill": None}, engine.name)
        cmds = cmds_on + cmds
        text = "Turn chunked prefill on (if this engine version has it off) and keep the chunk small."
    worst = max(spikes, key=lambda lv: lv.tpot_ms.p99 / lv.tpot_ms.p50)
    return Hit(
        title="Long prompts make the token stream stutter",
        message=f"TPOT p99 is {worst.tpot_ms.p99 / worst.tpot_ms.p50:.1f}x its p50 at {level_label(worst)} with "
                f"{worst.input_tokens_mean:.0f}-token prompts: prefills stall the decoding requests.",
        evidence=evidence, certainty=Certainty.LIKELY, impact=0.4, fix=Fix(text + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("SCHED002", "max-num-seqs-too-low", Severity.MEDIUM, ("server_config", "server_metrics|bench"), RuleDoc(
    what="Requests wait while KV usage is below 70% and the running batch equals max_num_seqs: the "
         "sequence cap, not memory, is the limit.",
    why="The scheduler stops admitting at max_num_seqs even when the KV cache has room, so requests queue "
        "and TTFT grows while the GPU could batch more (seed 000 quick reference).",
    example="server_config.max_num_seqs = 16, bench.c64.server.num_requests_running_max = 16, "
            "bench.c64.server.num_requests_waiting_mean = 40, bench.c64.server.kv_cache_usage_frac_max = 0.31",
    fix="Raise `--max-num-seqs` (keep it a power of two for CUDA graphs); SGLang `--max-running-requests`, TGI "
        "`--max-concurrent-requests`.",
    references=("seed 000 quick reference (good single-request latency, poor concurrency: --max-num-seqs)",
                "seed 004 §10 (tuning --max-num-seqs)"),
), thresholds=("SCHED002.max_kv_usage_frac",))
def sched002(ctx: Context) -> Hit | None:
    seqs = ctx.measured(ctx.need(ServerConfigData).max_num_seqs, "server_config.max_num_seqs")
    max_kv = ctx.th("SCHED002.max_kv_usage_frac")
    evidence: dict[str, Any] = {}
    seen = False
    metrics = ctx.snapshot.payload(ServerMetricsData)
    if metrics is not None:
        running, waiting = metrics.num_requests_running, metrics.num_requests_waiting
        usage, usage_key = metrics_kv_usage(metrics)
        if None not in (running, waiting, usage):
            seen = True
            if waiting > 0 and usage < max_kv and running >= seqs:
                evidence.update({"server_metrics.num_requests_running": running,
                                 "server_metrics.num_requests_waiting": waiting, usage_key: usage})
    for lv, s in (ctx.level_server() if ctx.bench is not None else ()):
        running, waiting, usage = (s.get("num_requests_running_max"), s.get("num_requests_waiting_mean"),
                                   s.get("kv_cache_usage_frac_max"))
        if None in (running, waiting, usage):
            continue
        seen = True
        if waiting > 0 and usage < max_kv and running >= seqs:
            p = level_label(lv)
            evidence.update({f"{p}.server.num_requests_running_max": running,
                             f"{p}.server.num_requests_waiting_mean": waiting,
                             f"{p}.server.kv_cache_usage_frac_max": usage})
    if not seen:
        raise MissingInput("running/waiting requests and KV usage were not measured together")
    if not evidence:
        return None
    proposed = pow2_at_least(seqs * 2)
    cmds, note = engine_flags({"max_num_seqs": proposed}, ctx.engine().name)
    return Hit(
        title="max_num_seqs caps the batch while KV has room",
        message=f"The batch is full at max_num_seqs={seqs} while requests wait and the KV cache is below "
                f"{pct(max_kv)}: the sequence cap, not memory, limits concurrency.",
        evidence={"server_config.max_num_seqs": seqs, **evidence}, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix(f"Raise max_num_seqs to {proposed} (a power of two keeps CUDA graph capture efficient)." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("SCHED003", "queueing-dominates-ttft", Severity.HIGH, ("bench|server_metrics",), RuleDoc(
    what="Server queue time is >= 50% of TTFT (and at least 50 ms, so that users can feel it), or between two "
         "bench levels client TTFT grows at least 3/4 as fast as concurrency while TPOT stays flat (<= 1.25x): "
         "requests wait for a slot, not for compute.",
    why="Queueing adds to TTFT before any work starts; it means demand exceeds the capacity this server "
        "admits (a KV or sequence cap, or simply too few replicas) (seed 001, seed 004 §10).",
    example="bench.c32.server.server_queue_time_ms_mean = 820, bench.c32.server.server_ttft_ms_mean = 1010",
    fix="Add capacity (replicas, or free the cap that KV001/SCHED002 name), route with least-pending-requests "
        "load balancing, and rate-limit at the gateway.",
    references=("seed 001 (watch queue depth: slow inference may be queueing)",
                "seed 004 §10 (scaling out: least-pending-requests routing)"),
), thresholds=("SCHED003.queue_share_frac", "SCHED003.min_queue_ms", "SCHED003.max_tpot_growth",
               "SCHED003.min_ttft_growth_frac_of_linear"))
def sched003(ctx: Context) -> Hit | None:
    share_min, min_queue = ctx.th("SCHED003.queue_share_frac"), ctx.th("SCHED003.min_queue_ms")
    evidence: dict[str, Any] = {}
    seen = False
    worst = 0.0
    if ctx.bench is not None:
        for lv, s in ctx.level_server():
            queue, server_ttft = s.get("server_queue_time_ms_mean"), s.get("server_ttft_ms_mean")
            if queue is None or not server_ttft:
                continue
            seen = True
            # Share of the TTFT the user sees (client TTFT includes the HTTP path) when it is larger.
            ttft = max(server_ttft, lv.ttft_ms.mean or 0.0)
            if queue >= min_queue and queue / ttft >= share_min:
                p = level_label(lv)
                evidence[f"{p}.server.server_queue_time_ms_mean"] = queue
                evidence[f"{p}.server.server_ttft_ms_mean"] = server_ttft
                if ttft > server_ttft:
                    evidence[f"{p}.ttft_ms.mean"] = lv.ttft_ms.mean
                worst = max(worst, queue / ttft)
        levels = sorted((lv for lv in ctx.levels() if lv.concurrency and lv.ttft_ms.p50 and lv.tpot_ms.p50),
                        key=lambda lv: lv.concurrency)
        for lo, hi in zip(levels, levels[1:], strict=False):
            if hi.concurrency < 2 * lo.concurrency:
                continue
            seen = True
            c_ratio = hi.concurrency / lo.concurrency
            ttft_ratio, tpot_ratio = hi.ttft_ms.p50 / lo.ttft_ms.p50, hi.tpot_ms.p50 / lo.tpot_ms.p50
            if ttft_ratio >= ctx.th("SCHED003.min_ttft_growth_frac_of_linear") * c_ratio and \
                    tpot_ratio <= ctx.th("SCHED003.max_tpot_growth"):
                evidence[f"{level_label(lo)}.ttft_ms.p50"] = lo.ttft_ms.p50
                evidence[f"{level_label(hi)}.ttft_ms.p50"] = hi.ttft_ms.p50
                evidence[f"{level_label(lo)}.tpot_ms.p50"] = lo.tpot_ms.p50
                evidence[f"{level_label(hi)}.tpot_ms.p50"] = hi.tpot_ms.p50
                evidence["derived.ttft_growth_x"] = round(ttft_ratio, 2)
                evidence["derived.concurrency_growth_x"] = round(c_ratio, 2)
    hist = ctx.seen(ServerMetricsData).histograms or {}
    queue_h, ttft_h = hist.get("queue_time_s") or HistogramWindow(), hist.get("ttft_s") or HistogramWindow()
    if queue_h.mean_s is not None and ttft_h.mean_s:
        seen = True
        if queue_h.mean_s * 1000 >= min_queue and queue_h.mean_s / ttft_h.mean_s >= share_min:
            evidence["server_metrics.histograms.queue_time_s.mean_s"] = queue_h.mean_s
            evidence["server_metrics.histograms.ttft_s.mean_s"] = ttft_h.mean_s
            worst = max(worst, queue_h.mean_s / ttft_h.mean_s)
    if not seen:
        raise MissingInput("neither server queue time nor a concurrency sweep of TTFT was measured")
    if not evidence:
        return None
    message = (f"Requests spend {pct(worst)} of their TTFT waiting in the server's queue." if worst else
               "TTFT grows in step with concurrency while TPOT stays flat: requests wait for a slot, not compute.")
    return Hit(
        title="Queueing dominates time to first token",
        message=message, evidence=evidence, certainty=Certainty.LIKELY, impact=0.7,
        fix=Fix("Add capacity: free the cap named by KV001/SCHED002 if they fire, otherwise add replicas behind "
                "a least-pending-requests load balancer (not round-robin), and rate-limit at the gateway.", ()),
    )


# ------------------------------------------------------------------------------------------------
@rule("SCHED004", "throughput-not-scaling", Severity.HIGH, ("bench",), RuleDoc(
    what="Output tokens/s grows less than 2x from concurrency 1 to 16 (a batching engine gives far more than "
         "2x, as decode is memory-bound and batching amortizes the weight reads).",
    why="Flat throughput under concurrency means requests are processed one (or a few) at a time: a "
        "non-batching engine, a tiny `--max-num-seqs`, or a single-request proxy in front (seed 000 §4).",
    example="bench.c1.output_tokens_per_s = 41, bench.c16.output_tokens_per_s = 55",
    fix="Use a continuous-batching engine (vLLM, SGLang, TGI); check `--max-num-seqs`; remove any "
        "one-at-a-time proxy or worker pool in front of the engine.",
    references=("seed 000 §4 (throughput doesn't scale with concurrency)", "seed 000 quick reference",
                "seed 004 §1 (batch=1 vs batch=128 tokens/s)"),
), thresholds=("SCHED004.min_scaling_x", "SCHED004.high_concurrency"))
def sched004(ctx: Context) -> Hit | None:
    by_c = {lv.concurrency: lv for lv in ctx.levels() if lv.concurrency and lv.output_tokens_per_s}
    if 1 not in by_c:
        raise MissingInput("no valid bench level at concurrency 1 with a throughput")
    high = ctx.th("SCHED004.high_concurrency")
    candidates = [c for c in by_c if c >= high]
    if not candidates:
        raise MissingInput(f"no valid bench level at concurrency >= {high:.0f}")
    c_hi = min(candidates)
    lo, hi = by_c[1], by_c[c_hi]
    ratio = hi.output_tokens_per_s / lo.output_tokens_per_s
    if ratio >= ctx.th("SCHED004.min_scaling_x"):
        return None
    engine = ctx.engine()
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    cmds: tuple[str, ...] = ()
    text = ("Serve with a continuous-batching engine (vLLM, SGLang, TGI), and remove any proxy or worker pool "
            "that forwards one request at a time.")
    if seqs is not None and seqs < c_hi:
        cmds, note = engine_flags({"max_num_seqs": pow2_at_least(max(c_hi, seqs * 2))}, engine.name)
        text = f"max_num_seqs={seqs} caps the batch below the offered concurrency: raise it." + note
    return Hit(
        title="Throughput does not scale with concurrency",
        message=f"Output throughput grows only {ratio:.1f}x from concurrency 1 to {c_hi} "
                f"({lo.output_tokens_per_s:.0f} -> {hi.output_tokens_per_s:.0f} tok/s): requests are not batched.",
        evidence={f"{level_label(lo)}.output_tokens_per_s": lo.output_tokens_per_s,
                  f"{level_label(hi)}.output_tokens_per_s": hi.output_tokens_per_s,
                  "derived.scaling_x": round(ratio, 2)},
        certainty=Certainty.CONFIRMED, impact=0.9, fix=Fix(text, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("SCHED005", "cuda-graphs-disabled", Severity.MEDIUM, ("server_config",), RuleDoc(
    what="The server runs with `--enforce-eager` (SGLang `--disable-cuda-graph`): CUDA graphs are off.",
    why="Decode steps are many small kernels; without CUDA graphs each is launched from Python, and launch "
        "overhead becomes a large share of TPOT, most of all at small batch (seed 002 lessons).",
    example="server_config.enforce_eager = true",
    fix="Remove `--enforce-eager` and keep `--max-num-seqs` a power of two so the captured graph sizes cover "
        "the batch.",
    references=("seed 002 lessons (CUDA graph capture; set max_num_seqs to a power of 2)",),
))
def sched005(ctx: Context) -> Hit | None:
    eager = ctx.measured(ctx.need(ServerConfigData).enforce_eager, "server_config.enforce_eager")
    if not eager:
        return None
    engine = ctx.engine()
    off_flag = DISABLING_FLAGS["cuda_graphs"].get(engine.name or "", "--enforce-eager")
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    extra = ""
    cmds: tuple[str, ...] = ()
    if seqs is not None and seqs & (seqs - 1):
        cmds, _ = engine_flags({"max_num_seqs": pow2_at_least(seqs)}, engine.name)
        extra = f" Also round max_num_seqs {seqs} up to {pow2_at_least(seqs)}."
    return Hit(
        title="CUDA graphs are disabled (eager mode)",
        message="The server runs in eager mode: every decode kernel is launched from Python.",
        evidence={"server_config.enforce_eager": True, "server_config.max_num_seqs": seqs},
        certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix(f"Remove `{off_flag}` from the server's command line.{extra}", cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("SCHED006", "ttft-superlinear-in-context", Severity.MEDIUM, ("bench",), RuleDoc(
    what="At batch 1, TTFT grows faster than linearly with prompt length beyond 8K tokens (TTFT ~ len^k with "
         "k >= 1.5), the mark of naive O(N^2) attention or an old engine.",
    why="Attention that materializes the N x N score matrix makes prefill quadratic in memory traffic; "
        "FlashAttention keeps it in SRAM (seed 000 §5: 2.2x TTFT at 32K).",
    example="bench.c1 (prompt 2048) ttft_ms.p50 = 180, bench.c1 (prompt 16384) ttft_ms.p50 = 4900",
    fix="Use a FlashAttention backend; upgrade the engine (vLLM >= 0.17 picks FA3/FA4 on Hopper/Blackwell).",
    references=("seed 000 §5 (TTFT slow at 32K+, fast at 2K: no FlashAttention)", "seed 004 §6"),
), thresholds=("SCHED006.min_context_tokens", "SCHED006.superlinear_exponent"))
def sched006(ctx: Context) -> Hit | None:
    points = sorted(((lv.input_tokens_mean, lv.ttft_ms.p50, lv) for lv in ctx.levels()
                     if lv.concurrency == 1 and lv.input_tokens_mean and lv.ttft_ms.p50),
                    key=lambda t: t[0])
    lengths = {round(p[0]) for p in points}
    if len(lengths) < 2 or points[-1][0] < ctx.th("SCHED006.min_context_tokens"):
        raise MissingInput("needs batch-1 bench levels at two or more prompt lengths, the longest >= "
                           f"{ctx.th('SCHED006.min_context_tokens'):.0f} tokens (a context sweep)")
    long_len, long_ttft, _ = points[-1]
    base = [p for p in points if p[0] <= long_len / 2]
    if not base:
        raise MissingInput("the prompt lengths in the sweep are too close together to fit a growth exponent")
    short_len, short_ttft, _ = base[-1]
    exponent = math.log(long_ttft / short_ttft) / math.log(long_len / short_len)
    if exponent < ctx.th("SCHED006.superlinear_exponent"):
        return None
    engine = ctx.engine()
    upgrade = "upgrade to vLLM >= 0.17, which selects FlashAttention 3/4 automatically" if engine.name == "vllm" \
        else "use an engine with a FlashAttention backend (vLLM >= 0.17, SGLang, TGI)"
    return Hit(
        title="TTFT grows faster than linearly with prompt length",
        message=f"At batch 1, TTFT grows as prompt_len^{exponent:.2f} from {short_len:.0f} to {long_len:.0f} "
                f"tokens ({ms(short_ttft)} -> {ms(long_ttft)}): attention is not using a flash kernel.",
        evidence={"derived.short_prompt_tokens": short_len, "derived.short_ttft_ms_p50": short_ttft,
                  "derived.long_prompt_tokens": long_len, "derived.long_ttft_ms_p50": long_ttft,
                  "derived.ttft_growth_exponent": round(exponent, 2), "derived.engine": engine.label},
        certainty=Certainty.LIKELY, impact=0.5,
        fix=Fix(f"Use a FlashAttention backend: {upgrade}.", ("python -c 'import vllm; print(vllm.__version__)'",)
                if engine.name == "vllm" else ()),
    )
