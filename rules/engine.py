"""Precision, engine and capacity rules (probes: server_config, server_metrics, logs, gpu; bench; an
earlier report as the baseline)."""
from __future__ import annotations

import json
from typing import Any

from triage.core.probe_data import LogsData, ServerConfigData, ServerMetricsData, ServerProcessData
from triage.core.report import Certainty, Fix, Severity
from triage.core.roofline import decode_tokens_per_s_bound
from triage.core.specs import match_nvml_name
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engines import NON_BATCHING_ENGINES, engine_flags
from triage.rules.fmt import gib, pct
from triage.rules.registry import rule

_NO_QUANT = frozenset({"none", "null", ""})
_SIXTEEN_BIT = frozenset({"auto", "float16", "bfloat16", "half", "fp16", "bf16"})


def _weight_bytes(ctx: Context) -> tuple[float, str]:
    if ctx.config.model_weight_bytes:
        return ctx.config.model_weight_bytes, "config.model.weight_bytes"
    if ctx.bench is not None and ctx.bench.config.get("model_weight_bytes"):
        return float(ctx.bench.config["model_weight_bytes"]), "bench.config.model_weight_bytes"
    plan_model = ((ctx.baseline or {}).get("plan") or {}).get("model") or {}
    if isinstance(plan_model.get("weight_bytes"), (int, float)) and plan_model["weight_bytes"] > 0:
        return float(plan_model["weight_bytes"]), "baseline.plan.model.weight_bytes"
    raise MissingInput("the model's weight bytes are unknown (set [model] weight_bytes in triage.toml, pass a "
                       "`triage plan` report as the baseline, or put model_weight_bytes in the bench config)")


def _spec_bandwidth_gbps(gpu: dict) -> float | None:
    """The spec-sheet memory bandwidth (GB/s) of an NVML GPU entry, from the one spec table."""
    name = gpu.name
    if not isinstance(name, str) or not name:
        return None
    total = gpu.memory_total_bytes
    spec = match_nvml_name(name, total if isinstance(total, int) else None)
    return None if spec is None else spec.hbm_bandwidth_bytes_per_s / 1e9


# ------------------------------------------------------------------------------------------------
@rule("QUANT001", "fp16-on-fp8-hardware", Severity.MEDIUM, ("server_config", "gpu"), RuleDoc(
    what="The model is served in fp16/bf16 without quantization on a Hopper or Blackwell GPU (compute "
         "capability >= 9.0), which runs FP8 natively.",
    why="Decode is memory-bound: FP8 weights halve the bytes read per token, for 1.5-2x throughput with "
        "< 1-2% quality loss, and free VRAM for KV (seed 000 §3).",
    example="server_config.dtype = 'bfloat16', server_config.quantization = null, gpu.gpus[0].compute_capability = [9, 0]",
    fix="`--quantization fp8` (not `--dtype fp8`, which vLLM rejects), or serve a pre-quantized FP8 "
        "checkpoint; SGLang `--quantization fp8`, TGI `--quantize fp8`.",
    references=("seed 000 §3 (FP16 when lower precision works)", "seed 004 §8 (FP8 on Hopper: near-lossless)"),
))
def quant001(ctx: Context) -> Hit | None:
    data = ctx.need(ServerConfigData)
    quant = data.quantization
    if quant is not None and str(quant).lower() not in _NO_QUANT:
        return None
    dtype = ctx.measured(ctx.need(ServerConfigData).dtype, "server_config.dtype")
    if str(dtype).lower() not in _SIXTEEN_BIT:
        return None
    cc = ctx.compute_capability()
    if cc < (9, 0):
        return None
    explicit = ctx.cfg_source("quantization") not in (None, "default")
    cmds, note = engine_flags({"quantization_fp8": None}, ctx.engine().name)
    return Hit(
        title="16-bit weights on a GPU with native FP8",
        message=(f"The model is served as {dtype} with no quantization on a compute-capability {cc[0]}.{cc[1]} GPU: "
                 "FP8 would halve the bytes each decode step reads." if explicit else
                 f"No quantization was seen (dtype {dtype}, no --quantization flag) on a compute-capability "
                 f"{cc[0]}.{cc[1]} GPU: if the weights really are 16-bit, FP8 would halve the bytes each decode "
                 "step reads (a pre-quantized checkpoint needs no flag: check the model's config.json)."),
        evidence={"server_config.dtype": dtype, "server_config.quantization": quant,
                  "server_config.sources.quantization": ctx.cfg_source("quantization"),
                  "gpu.compute_capability": list(cc)},
        certainty=Certainty.LIKELY if explicit else Certainty.POSSIBLE, impact=0.5,
        fix=Fix("Serve FP8 weights (dynamic FP8 quantization, or an FP8 checkpoint); check quality on your own "
                "eval set. Note: `--dtype fp8` is not accepted, use `--quantization fp8`." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("QUANT002", "model-does-not-fit", Severity.CRITICAL, ("server_config", "server_metrics|logs"), RuleDoc(
    what="Weights + minimum KV + overhead exceed VRAM x utilization for the chosen TP: the KV cache left after "
         "loading cannot hold one max_model_len sequence (from the log's KV cache size or the cache_config "
         "block count).",
    why="The engine either refuses to start, or runs with a KV pool so small that every long request "
        "preempts the others; in frameworks without paging it spills to the CPU (seed 000 §1, seed 001).",
    example="server_config.max_model_len = 32768, logs.kv_cache_tokens = 9120",
    fix="Quantize, raise TP, or lower `--max-model-len` to what fits; `triage plan` gives the numbers.",
    references=("seed 000 §1 (the model doesn't fit in VRAM)", "seed 001 (the model fitting is only step one)"),
))
def quant002(ctx: Context) -> Hit | None:
    max_len = ctx.measured(ctx.need(ServerConfigData).max_model_len, "server_config.max_model_len")
    capacity, where = ctx.kv_capacity_tokens()
    if capacity >= max_len:
        return None
    engine = ctx.engine()
    fit_len = max(256, (int(capacity) // 256) * 256)
    cmds, note = engine_flags({"max_model_len": fit_len}, engine.name)
    return Hit(
        title="The model does not fit with room for one full-length request",
        message=f"After the weights, the KV cache holds {capacity:.0f} tokens, less than max_model_len={max_len}: "
                "one maximum-length request cannot fit.",
        evidence={"server_config.max_model_len": max_len, where: capacity,
                  "server_config.tensor_parallel_size": ctx.seen(ServerConfigData).tensor_parallel_size},
        certainty=Certainty.CONFIRMED, impact=1.0,
        fix=Fix(f"Quantize the weights, add tensor parallelism, or cap the context at {fit_len} tokens; `triage "
                "plan` computes the fit." + note, cmds + ("triage plan",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("ENG001", "non-batching-engine-in-production", Severity.HIGH, ("server_process|server_config|bench",), RuleDoc(
    what="The endpoint is Ollama, a llama.cpp server or a bare Hugging Face `generate()` wrapper, under "
         "concurrent load (without a bench showing load, it is reported as possible).",
    why="These serve one request (or a fixed batch) at a time: the GPU idles between requests and throughput "
        "stays flat as users are added (seed 000 §7: 'Ollama for local, not production traffic').",
    example="server_process.engine = 'ollama', bench.c16.output_tokens_per_s = 48, bench.c1.output_tokens_per_s = 44",
    fix="Serve with vLLM, SGLang, TGI or TensorRT-LLM; they speak the same OpenAI API, so clients do not change.",
    references=("seed 000 §7 (wrong inference engine for the workload)", "seed 002 (naive FastAPI + generate())"),
))
def eng001(ctx: Context) -> Hit | None:
    engine = ctx.identified_engine()
    if engine.name not in NON_BATCHING_ENGINES:
        return None
    evidence: dict[str, Any] = {"server_process.engine": ctx.seen(ServerProcessData).engine or engine.name}
    loaded = []
    if ctx.bench is not None:
        loaded = [lv for lv in ctx.bench.levels if (lv.concurrency or 0) >= 2 or (lv.request_rate or 0) > 0]
        for lv in loaded:
            evidence[f"{level_label(lv)}.output_tokens_per_s"] = lv.output_tokens_per_s
    model = ctx.seen(ServerConfigData).model or "<hf-model-id-or-path>"
    return Hit(
        title=f"A non-batching engine ({engine.name}) serves this endpoint",
        message=(f"The endpoint is {engine.name}, which does not batch concurrent requests"
                 + (", and it was load-tested with concurrent requests." if loaded else
                    "; if it serves concurrent production traffic, requests wait for each other.")),
        evidence=evidence, severity=Severity.HIGH if loaded else Severity.MEDIUM,
        certainty=Certainty.CONFIRMED if loaded else Certainty.POSSIBLE, impact=0.9,
        fix=Fix("Serve the model with a continuous-batching engine; the OpenAI-compatible API stays the same.",
                (f"vllm serve {model}", f"python -m sglang.launch_server --model-path {model}")),
    )


# ------------------------------------------------------------------------------------------------
@rule("ENG002", "below-roofline", Severity.MEDIUM, ("bench",), RuleDoc(
    what="Measured decode tokens/s at concurrency 1 is below 50% of the memory-bandwidth roofline for this "
         "model and GPU (tok/s <= TP x bandwidth / weight bytes).",
    why="Decode at batch 1 reads every weight once per token, so bandwidth / weight bytes is the ceiling; "
        "well-configured engines reach 60-80% of it. Far below means the engine, its config or the GPU "
        "(clocks, PCIe, contention) wastes the hardware (seed 000 §7: 30-50% under benchmark).",
    example="bench.c1.tpot_ms.p50 = 38 (26 tok/s), derived.roofline_tokens_per_s = 209, "
            "config.model.weight_bytes = 1.6e10, derived.gpu_memory_bandwidth_gbps_spec = 3350",
    fix="Check the engine version and config (ENG005, SCHED005, GPU002, GPU004 find the usual causes); "
        "compare with `triage baseline` on the same host.",
    references=("seed 000 §7 (30-50% under published benchmarks: engine config or version)",
                "seed 004 §2-3 (decode is memory-bandwidth-bound)"),
), thresholds=("ENG002.min_roofline_frac",))
def eng002(ctx: Context) -> Hit | None:
    weight, weight_src = _weight_bytes(ctx)
    c1 = [lv for lv in ctx.levels() if lv.concurrency == 1 and lv.tpot_ms.p50]
    if not c1:
        raise MissingInput("no valid concurrency-1 bench level with a TPOT")
    tpot = c1[0].tpot_ms.p50
    measured = 1000.0 / tpot
    gpus = ctx.serving_gpus() if ctx.has("gpu") else []
    names = [g.name for g in gpus]
    bws = [_spec_bandwidth_gbps(g) for g in gpus]
    if not bws or any(b is None for b in bws):
        raise MissingInput("the GPU's memory bandwidth is unknown (GPU not identified, or not in "
                           "triage/core/specs.py)")
    tp = ctx.seen(ServerConfigData).tensor_parallel_size or 1
    bw = min(bws) * tp
    roofline = decode_tokens_per_s_bound(batch_size=1, bandwidth_bytes_per_s=bw * 1e9, weight_bytes=weight,
                                         context_tokens=0.0, kv_bytes_per_token=0.0)
    frac = measured / roofline
    if frac >= ctx.th("ENG002.min_roofline_frac"):
        return None
    return Hit(
        title="Decode runs far below the memory-bandwidth roofline",
        message=f"At concurrency 1 decode runs at {measured:.0f} tok/s, {pct(frac)} of the {roofline:.0f} tok/s "
                f"that {tp} x {names[0]} ({min(bws):.0f} GB/s spec) allows for {gib(weight)} of weights.",
        evidence={f"{level_label(c1[0])}.tpot_ms.p50": tpot, "derived.decode_tokens_per_s": round(measured, 1),
                  weight_src: weight, "derived.gpu_memory_bandwidth_gbps_spec": min(bws),
                  "server_config.tensor_parallel_size": tp, "derived.roofline_tokens_per_s": round(roofline, 1),
                  "derived.roofline_frac": round(frac, 3)},
        certainty=Certainty.LIKELY, impact=0.6,
        fix=Fix("Look for the cause in the other findings (eager mode, throttling, PCIe, old engine); compare with "
                "`triage baseline` on this host to see what the hardware reaches.", ("triage baseline",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("ENG003", "spec-decode-low-acceptance", Severity.MEDIUM, ("server_metrics",), RuleDoc(
    what="Speculative decoding's draft acceptance rate is below 0.5.",
    why="Every rejected draft token is wasted work on both models; below ~50% acceptance speculation costs "
        "more than it saves, typically at high temperature or with a mismatched draft (seed 002 step 5).",
    example="server_metrics.spec_decode_acceptance_rate = 0.31, server_config.speculative_config = "
            "{num_speculative_tokens: 5}",
    fix="Lower `num_speculative_tokens`, use a draft closer to the target (same family, fine-tuned alike), or "
        "disable speculation for high-temperature traffic.",
    references=("seed 002 step 5 (speculative decoding: acceptance 75-85%; worse at high temperature)",),
), thresholds=("ENG003.min_acceptance_frac",))
def eng003(ctx: Context) -> Hit | None:
    rate = ctx.seen(ServerMetricsData).spec_decode_acceptance_rate
    spec = ctx.seen(ServerConfigData).speculative_config
    if rate is None:
        if ctx.has("server_config") and spec is None:
            raise MissingInput("speculative decoding is not configured")
        raise MissingInput("server_metrics.spec_decode_acceptance_rate was not measured")
    if rate >= ctx.th("ENG003.min_acceptance_frac"):
        return None
    n = spec.get("num_speculative_tokens") if isinstance(spec, dict) else None
    cmds: tuple[str, ...] = ()
    if n:
        k = max(1, int(n) // 2)
        new = {**spec, "num_speculative_tokens": k}
        engine = ctx.engine().name
        if engine == "vllm":
            cmds = (f"--speculative-config '{json.dumps(new, sort_keys=True)}'",)
        elif engine == "sglang":
            cmds = (f"--speculative-num-draft-tokens {k}",)
    return Hit(
        title="Speculative decoding rejects most draft tokens",
        message=f"Only {pct(rate)} of draft tokens are accepted: speculation costs more than it saves.",
        evidence={"server_metrics.spec_decode_acceptance_rate": rate, "server_config.speculative_config": spec},
        certainty=Certainty.CONFIRMED, impact=0.3,
        fix=Fix("Propose fewer tokens per step" + (f" ({n} -> {max(1, int(n) // 2)})" if n else "") + ", use a draft "
                "model closer to the target, or turn speculation off for high-temperature traffic.", cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("ENG004", "tensor-parallel-oversized", Severity.MEDIUM, ("server_config", "gpu", "server_metrics|bench"), RuleDoc(
    what="Tensor parallelism is larger than the smallest power-of-two TP whose KV cache would still hold the "
         "peak observed KV demand with 20% headroom (and one max_model_len sequence).",
    why="Every TP step all-reduces after each layer: TP=2 beats TP=4 for the same model when both fit "
        "(seed 004 §9, §11). Spare GPUs serve more as extra replicas.",
    example="server_config.tensor_parallel_size = 4, derived.peak_kv_tokens = 21000, "
            "derived.kv_tokens_at_tp2 = 160000",
    fix="Use the smallest TP that fits (`--tensor-parallel-size 2`) and run the other GPUs as replicas.",
    references=("seed 004 §9 (TP=2 is faster than TP=4)", "seed 004 §11 (right-size GPU count: smallest TP that fits)"),
), thresholds=("ENG004.kv_headroom_ratio", "ENG004.overhead_bytes_per_gpu"))
def eng004(ctx: Context) -> Hit | None:
    tp = ctx.measured(ctx.need(ServerConfigData).tensor_parallel_size, "server_config.tensor_parallel_size")
    if tp <= 1:
        return None
    weight, weight_src = _weight_bytes(ctx)
    util = ctx.measured(ctx.need(ServerConfigData).gpu_memory_utilization, "server_config.gpu_memory_utilization")
    max_len = ctx.measured(ctx.need(ServerConfigData).max_model_len, "server_config.max_model_len")
    totals = [g.memory_total_bytes for g in ctx.serving_gpus() if g.memory_total_bytes]
    if not totals:
        raise MissingInput("gpu.memory_total_bytes was not measured")
    capacity, _ = ctx.kv_capacity_tokens()
    peaks = []
    if ctx.seen(ServerMetricsData).kv_cache_usage_frac_max is not None:
        peaks.append(ctx.seen(ServerMetricsData).kv_cache_usage_frac_max)
    if ctx.bench is not None:
        peaks += [s["kv_cache_usage_frac_max"] for _, s in ctx.level_server() if s.get("kv_cache_usage_frac_max") is not None]
    if not peaks:
        raise MissingInput("the peak KV cache usage was not measured")
    peak_tokens = max(peaks) * capacity
    overhead = ctx.th("ENG004.overhead_bytes_per_gpu")
    budget = util * min(totals) - overhead

    def kv_bytes(t: int) -> float:
        return t * budget - weight

    if kv_bytes(tp) <= 0:
        raise MissingInput("the memory figures are inconsistent (no KV room at the current TP by this estimate)")
    need = max(peak_tokens * ctx.th("ENG004.kv_headroom_ratio"), max_len)
    smallest = tp
    t = tp // 2
    while t >= 1:
        tokens = capacity * kv_bytes(t) / kv_bytes(tp)
        if kv_bytes(t) > 0 and tokens >= need:
            smallest = t
        else:
            break
        t //= 2
    if smallest >= tp:
        return None
    tokens_small = capacity * kv_bytes(smallest) / kv_bytes(tp)
    cmds, note = engine_flags({"tensor_parallel_size": smallest}, ctx.engine().name)
    return Hit(
        title="Tensor parallelism is larger than the model needs",
        message=f"TP={tp}, but TP={smallest} would still hold about {tokens_small:.0f} KV tokens, above the peak "
                f"demand of {peak_tokens:.0f} tokens plus headroom: the extra all-reduces cost latency.",
        evidence={"server_config.tensor_parallel_size": tp, weight_src: weight,
                  "server_config.gpu_memory_utilization": util, "derived.kv_capacity_tokens": capacity,
                  "derived.peak_kv_tokens": round(peak_tokens), f"derived.kv_tokens_at_tp{smallest}": round(tokens_small)},
        certainty=Certainty.POSSIBLE, impact=0.3,
        fix=Fix(f"Serve at TP={smallest} and run the freed GPUs as replicas behind a least-pending load balancer."
                + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("ENG005", "engine-outdated", Severity.LOW, ("server_config",), RuleDoc(
    what="The engine version predates the defaults this catalog assumes: vLLM < 0.17 (FlashAttention 3/4 "
         "chosen automatically; < 0.8 still the V0 engine), TGI < 3.0 (prefix caching and chunked prefill "
         "on by default).",
    why="Newer engines enable the big optimizations by default (V1 scheduler, chunked prefill, prefix "
        "caching, FA3/FA4): an old one leaves them off or slower (seed 000 §5).",
    example="server_config.engine = 'vllm', server_config.engine_version = '0.6.3'",
    fix="Upgrade the engine (vLLM >= 0.17, TGI >= 3.0), then re-run `triage bench` to compare.",
    references=("seed 000 §5 (vLLM v0.17+ with FlashAttention 3/4)", "vLLM 0.8.0 release notes (V1 by default)"),
))
def eng005(ctx: Context) -> Hit | None:
    engine = ctx.identified_engine()
    v = engine.version_tuple
    if engine.name in ("vllm", "tgi") and v is None:
        raise MissingInput(f"server_config.engine_version was not measured for {engine.name}")
    if engine.name == "vllm" and v < (0, 17, 0):
        old = engine.v0
        return Hit(
            title="The vLLM version is outdated",
            message=f"vLLM {engine.version}" + (" runs the V0 engine (no V1 scheduler, chunked prefill and prefix "
                                                 "caching off by default)" if old else
                                                 " predates automatic FlashAttention 3/4 (0.17)") + ".",
            evidence={"server_config.engine": "vllm", "server_config.engine_version": engine.version,
                      "derived.v0_engine": old},
            severity=Severity.MEDIUM if old else Severity.LOW, certainty=Certainty.CONFIRMED,
            impact=0.4 if old else 0.2,
            fix=Fix("Upgrade vLLM, then re-run `triage bench` against the same traffic to confirm the gain.",
                    ("pip install -U 'vllm>=0.17'",)),
        )
    if engine.name == "tgi" and v < (3, 0, 0):
        return Hit(
            title="The TGI version is outdated",
            message=f"TGI {engine.version} predates 3.0, which turned on prefix caching and chunked prefill by default.",
            evidence={"server_config.engine": "tgi", "server_config.engine_version": engine.version},
            certainty=Certainty.CONFIRMED, impact=0.2,
            fix=Fix("Upgrade to TGI 3.x (ghcr.io/huggingface/text-generation-inference:3 or newer).", ()),
        )
    return None


# ------------------------------------------------------------------------------------------------
@rule("ENG006", "long-uptime-degradation", Severity.MEDIUM, ("bench", "baseline"), RuleDoc(
    what="Throughput has fallen >= 15% against this host's own earlier bench report at the same concurrency, "
         "while preemptions accumulate (and, where measured, the server has been up for a day or more).",
    why="Long-running engines degrade: KV fragmentation and leaks show up as preemptions and a slow "
        "throughput slide (seed 003 case 2: 610 -> 420 tok/s after five days; seed 002: -15% after 48 h).",
    example="baseline.bench.c16.output_tokens_per_s = 610, bench.c16.output_tokens_per_s = 420, "
            "bench.c16.server.num_preemptions_delta = 55",
    fix="Do a rolling restart, then alert on a week-over-week throughput drop (compare with `triage compare`).",
    references=("seed 003 case 2 (KV-cache fragmentation after five days)", "seed 002 lessons (daily rolling restart)"),
), thresholds=("ENG006.min_drop_frac", "ENG006.long_uptime_s"))
def eng006(ctx: Context) -> Hit | None:
    base_bench = (ctx.baseline or {}).get("bench")
    if not isinstance(base_bench, dict) or not base_bench.get("levels"):
        raise MissingInput("the baseline report has no bench levels to compare with")
    base_model = (ctx.baseline.get("target") or {}).get("model") or (base_bench.get("config") or {}).get("model")
    cur_model = ctx.bench_section().config.get("model")
    if base_model and cur_model and base_model != cur_model:
        raise MissingInput(f"the baseline ran model {base_model!r}, this bench {cur_model!r}: not comparable")
    base_tps = {lv.get("concurrency"): lv.get("output_tokens_per_s") for lv in base_bench["levels"]
                if lv.get("concurrency") and lv.get("output_tokens_per_s") and (lv.get("client") or {}).get("valid", True)}
    drops = []
    for lv in ctx.levels():
        before = base_tps.get(lv.concurrency)
        if before and lv.output_tokens_per_s is not None:
            drops.append((lv, before, 1 - lv.output_tokens_per_s / before))
    if not drops:
        raise MissingInput("no concurrency level appears in both this bench and the baseline")
    worst = max(drops, key=lambda d: d[2])
    if worst[2] < ctx.th("ENG006.min_drop_frac"):
        return None
    preempt = [(lv, s["num_preemptions_delta"]) for lv, s in ctx.level_server() if s.get("num_preemptions_delta") is not None]
    if not preempt:
        raise MissingInput("throughput fell, but preemptions were not measured to tell degradation from other causes")
    growing = [(lv, n) for lv, n in preempt if n > 0]
    if not growing:
        return None
    uptime = ctx.seen(ServerProcessData).uptime_s
    if uptime is not None and uptime < ctx.th("ENG006.long_uptime_s"):
        return None
    lv, before, drop = worst
    evidence: dict[str, Any] = {f"baseline.{level_label(lv)}.output_tokens_per_s": before,
                                f"{level_label(lv)}.output_tokens_per_s": lv.output_tokens_per_s,
                                "derived.throughput_drop_frac": round(drop, 3)}
    for glv, n in growing:
        evidence[f"{level_label(glv)}.server.num_preemptions_delta"] = n
    if uptime is not None:
        evidence["server_process.uptime_s"] = uptime
    return Hit(
        title="Throughput has degraded since the earlier report",
        message=f"Throughput at {level_label(lv)} fell {pct(drop)} against this host's earlier report "
                f"({before:.0f} -> {lv.output_tokens_per_s:.0f} tok/s) while preemptions accumulate.",
        evidence=evidence, certainty=Certainty.LIKELY if uptime is not None else Certainty.POSSIBLE, impact=0.5,
        fix=Fix("Do a rolling restart of the server, and alert on a week-over-week throughput drop; gate it in CI "
                "with `triage compare`.", ("triage compare BASE.json CAND.json --max-regression output_tokens_per_s=15",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("ENG007", "multi-gpu-communication-stalls", Severity.HIGH, ("logs",), RuleDoc(
    what="The server log shows NCCL errors, or vLLM's 'No available shared memory broadcast block found' "
         "warnings: the workers of a multi-GPU (TP/PP) server stall waiting for each other.",
    why="Each engine step waits for every worker; a worker stuck on a collective (a slow or failing link, an "
        "oversubscribed CPU, a hung GPU) stalls all requests, which shows as long TTFT/ITL gaps and timeouts.",
    example="logs.num_shm_broadcast_stalls = 14, logs.num_nccl_errors = 0",
    fix="Check the GPUs' links and health (GPU004, GPU006, GPU010), give the workers CPU headroom, and set "
        "NCCL_DEBUG=INFO to find the failing collective.",
    references=("vLLM log 'No available shared memory broadcast block found in 60 seconds'",
                "NCCL troubleshooting (NCCL_DEBUG=INFO)", "seed 002 step 6 (interconnect)"),
))
def eng007(ctx: Context) -> Hit | None:
    nccl, stalls = ctx.seen(LogsData).num_nccl_errors, ctx.seen(LogsData).num_shm_broadcast_stalls
    if nccl is None and stalls is None:
        raise MissingInput("logs.num_nccl_errors and logs.num_shm_broadcast_stalls were not measured")
    if not (nccl or 0) and not (stalls or 0):
        return None
    return Hit(
        title="Multi-GPU workers stall on communication",
        message="The server log has " + " and ".join(
            part for part in (f"{nccl} NCCL error line(s)" if nccl is not None else "",
                              f"{stalls} shared-memory broadcast stall warning(s)" if stalls is not None else "")
            if part) + ": workers wait for each other.",
        evidence={"logs.num_nccl_errors": nccl, "logs.num_shm_broadcast_stalls": stalls, "logs.path": ctx.seen(LogsData).path},
        severity=Severity.HIGH if nccl else Severity.MEDIUM, certainty=Certainty.CONFIRMED, impact=0.6,
        fix=Fix("Check the GPU links and health, give the worker processes CPU headroom, and rerun with NCCL_DEBUG=INFO "
                "to see which collective fails.", ("export NCCL_DEBUG=INFO",)),
    )
