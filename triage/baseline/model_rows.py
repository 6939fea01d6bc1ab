"""Model-side ablations: naive → flash attention, bf16 → fp8 → int4 weights, FP8 KV cache, the
decode roofline, and CPU → GPU FP8. Rows that cannot apply on this host say why."""
from __future__ import annotations

import copy
import statistics
import time

import torch

from triage.baseline.ablation_context import Context
from triage.baseline.engine_driver import (
    Driver,
    blocks,
    fit_tokens,
    greedy,
    make_engine,
    peak_memory,
    synthetic_prompt,
    warm,
)
from triage.baseline.quality import LogitError, compare_logits, engine_prefill_logits
from triage.baseline.results import AblationRow, Better, measured, skipped
from triage.reference_engine.layers.quant import model_weight_bytes, quantize_model

WARM_DECODE_STEPS = 2


def attention(ctx: Context) -> list[AblationRow]:
    cfg, mc = ctx.cfg, ctx.model_config
    n = fit_tokens(cfg.attention_context_tokens, mc.max_position_embeddings, 8, "a long context", minimum=32)
    prompt = synthetic_prompt(n, mc.vocab_size, seed=3)
    mem: dict[str, int | None] = {}
    method = ""
    backends = list(cfg.attention_backends)
    if cfg.device.startswith("cuda"):
        from triage.reference_engine.layers.attention.triton_backend import register_triton_backend

        triton_reason = register_triton_backend(cfg.device)
        ctx.extras["triton_reason"] = triton_reason
        if triton_reason is None:
            backends.append("triton")
            from triage.reference_engine.layers.attention.triton_bench import time_prefill_vs_sdpa

            ctx.on_step("attention: triton prefill vs sdpa @ 8K")
            ctx.extras["triton_prefill"] = time_prefill_vs_sdpa(
                8192, mc.num_attention_heads, mc.num_key_value_heads, mc.head_dim, device=cfg.device)
    engines = {}
    for backend in backends:
        engine = make_engine(cfg, attention=backend, max_model_len=n + 8, max_num_seqs=1,
                             num_kv_blocks=blocks(n + 8) + 2, max_num_batched_tokens=n + 8,
                             enable_prefix_caching=False)
        layers = engine.runner.model.model.layers
        num_layers = min(cfg.attention_num_layers or len(layers), len(layers))
        engine.runner.model.model.layers = layers[:num_layers]     # the rest of the forward is unchanged
        engine.generate([synthetic_prompt(16, mc.vocab_size, seed=998)], greedy(1))
        engines[backend] = engine
    runs_ms: dict[str, list[float]] = {b: [] for b in backends}
    for repeat in range(cfg.attention_repeats):           # backends alternate; each keeps its best run
        for backend, engine in engines.items():
            ctx.on_step(f"attention: {backend} @ {n} tokens ({repeat + 1}/{cfg.attention_repeats})")
            drv = Driver(engine)
            with peak_memory(cfg.device) as peak:
                drv.add("long", prompt, greedy(1))
                drv.run_until_done()
            runs_ms[backend].append(drv.traces["long"].ttft_s * 1e3)
            if peak.peak_extra_bytes is not None:
                mem[backend] = max(mem.get(backend) or 0, peak.peak_extra_bytes)
            method = peak.method
    ttft_ms = {b: min(r) for b, r in runs_ms.items()}
    flash = "sdpa"
    sliced = num_layers < mc.num_hidden_layers
    metric = f"TTFT at {n} tokens" + (f", {num_layers} of {mc.num_hidden_layers} layers" if sliced else "")
    details = {"context_tokens": n, "ttft_ms": ttft_ms, "ttft_runs_ms": runs_ms, "num_layers": num_layers,
               "num_layers_model": mc.num_hidden_layers,
               "layers_note": (f"the prompt runs through the first {num_layers} of the model's {mc.num_hidden_layers} "
                               "identical layers to fit the time budget; TTFT is per-layer work plus an embedding "
                               "gather and one LM-head row, so the ratio is the full model's") if sliced else None,
               "peak_extra_bytes": mem, "memory_method": method,
               "flash_backend": "torch SDPA (fused flash kernel); 'tiled' is the FlashAttention algorithm in "
                                "plain PyTorch"}
    rows = [measured("attention", "standard → flash attention", "~2.2× TTFT at 32K", metric,
                     "ms", Better.LOWER, "naive", ttft_ms["naive"], flash, ttft_ms[flash], **details)]
    if mem.get("naive") is not None and mem.get(flash) is not None:
        rows.append(measured("attention-memory", "standard → flash attention", None,
                             f"peak extra memory at {n} tokens", "bytes", Better.LOWER, "naive",
                             float(mem["naive"]), flash, float(mem[flash]), **details))
    return rows


def _decode_tok_s(engine, vocab: int, num_tokens: int, prompt_tokens: int = 32) -> float:
    """Decode tokens/s of one request (bs = 1): tokens after the first over the time they took."""
    drv = Driver(engine)
    drv.add("d", synthetic_prompt(prompt_tokens, vocab, seed=11), greedy(num_tokens + 1))
    drv.run_until_done()
    tpot = drv.traces["d"].tpot_s
    if not tpot:
        raise RuntimeError("the decode produced fewer than two tokens; nothing to time")
    return 1.0 / tpot


def _paired_decode_tok_s(engine, base, model, vocab: int, num_tokens: int, rounds: int) -> tuple[float, float]:
    """Decode tok/s at bs=1 of ``base`` and of ``model`` on one engine, each the median of ``rounds`` runs taken
    in alternation: on a shared host a neighbour's burst then lands on both sides, not on one of them (single
    runs of 4 tokens gave FP8 1.5x and 3.7x the bf16 model a minute apart on the 2-vCPU Xeon)."""
    runs: dict[str, list[float]] = {"base": [], "model": []}
    try:
        for _ in range(rounds):
            for side, m in (("base", base), ("model", model)):
                engine.runner.model = m
                runs[side].append(_decode_tok_s(engine, vocab, num_tokens))
    finally:
        engine.runner.model = base
    return statistics.median(runs["base"]), statistics.median(runs["model"])


def weights(ctx: Context) -> list[AblationRow]:
    """bf16 → fp8 → int4 on one engine: the model is swapped between measurements (handlers), and each
    quantized model is timed in alternation with the unquantized one (``quant_rounds`` times each)."""
    cfg, mc = ctx.cfg, ctx.model_config
    ctx.on_step("weights: baseline model")
    max_len = 32 + cfg.quant_decode_tokens + 16
    engine = make_engine(cfg, max_num_seqs=1, max_model_len=max(max_len, cfg.quality_prompt_tokens + 8),
                         num_kv_blocks=blocks(max(max_len, cfg.quality_prompt_tokens + 8)) + 2,
                         enable_prefix_caching=False)
    warm(engine, mc.vocab_size)
    base = engine.runner.model
    prompts = [synthetic_prompt(cfg.quality_prompt_tokens, mc.vocab_size, seed=200 + i)
               for i in range(cfg.quality_num_prompts)]
    ref_logits = [base.forward_full(p) for p in prompts]
    base_name = engine.stats().dtype
    base_path = _base_path(engine)
    results: dict[str, dict] = {base_name: {"weight_bytes": model_weight_bytes(base), "paths": {},
                                            "decode_tok_s": None, "error": None, "path": base_path}}
    base_runs: list[float] = []
    for scheme in ("fp8", "int4"):
        ctx.on_step(f"weights: {scheme}")
        qmodel = copy.deepcopy(base)
        # Under fp32 compute on a CPU, torch's fp32 int4 kernel is a slow loop: run int4 through its bf16 kernel.
        kernel_dtype = torch.bfloat16 if scheme == "int4" and cfg.device == "cpu" and base_name == "float32" else None
        summary = quantize_model(qmodel, scheme, group_size=cfg.quant_group_size, int4_kernel_dtype=kernel_dtype)
        num = cfg.quant_fp8_decode_tokens if scheme == "fp8" else cfg.quant_decode_tokens
        base_tok_s, tok_s = _paired_decode_tok_s(engine, base, qmodel, mc.vocab_size, num, cfg.quant_rounds)
        base_runs.append(base_tok_s)
        err = compare_logits(ref_logits, [qmodel.forward_full(p) for p in prompts])
        path = _quant_path(summary, cfg.device)
        results[scheme] = {"weight_bytes": summary.weight_bytes_after, "paths": summary.paths,
                           "linear_compression": summary.linear_compression_frac,
                           "decode_tok_s": tok_s, "base_decode_tok_s": base_tok_s, "error": err,
                           "num_layers_converted": summary.num_layers_converted,
                           "kernel_dtype": "float32" if path["kernel"].startswith("cpu_") else
                           None if kernel_dtype is None else "bfloat16", "path": path}
        del qmodel
    results[base_name]["decode_tok_s"] = statistics.median(base_runs)
    ctx.extras["weights"] = results
    ctx.extras["weights_base"] = base_name
    rows = []
    b = results[base_name]
    for scheme, seed in (("fp8", "~1.7× (FP16 → FP8 on H100)"), ("int4", None)):
        r = results[scheme]
        e: LogitError = r["error"]
        rows.append(measured(
            f"weights-{scheme}", f"{base_name} → {scheme} weights", seed, "decode tokens/s at bs=1", "tok/s",
            Better.HIGHER, base_name, r["base_decode_tok_s"], scheme, r["decode_tok_s"],
            decode_rounds=cfg.quant_rounds,
            weight_bytes={base_name: b["weight_bytes"], scheme: r["weight_bytes"]},
            weight_compression=b["weight_bytes"] / r["weight_bytes"],
            linear_weight_compression=r["linear_compression"], execution_paths=r["paths"],
            logit_error_max_abs=e.max_abs, logit_error_mean_abs=e.mean_abs,
            top1_agreement_frac=e.top1_agreement_frac, reference_logit_std=e.reference_logit_std,
            num_quality_prompts=e.num_prompts, num_quality_positions=e.num_positions,
            kernel_dtype=r["kernel_dtype"] or base_name,
            group_size=cfg.quant_group_size if scheme == "int4" else None,
            # What ran (the after side; base_path: the before side): a slow fallback says so here.
            kernel=r["path"]["kernel"], isa=r["path"]["isa"], bytes_per_weight=r["path"]["bytes_per_weight"],
            activations=r["path"].get("activations"),
            fell_back=r["path"]["fell_back"], path_reason=r["path"]["reason"], base_path=base_path))
    return rows


def _base_path(engine) -> dict:
    """The unquantized model's Linear path: the bf16-stored kernel, or torch's matmul in the weights' dtype."""
    from triage.reference_engine.layers.kernels.bf16_weights import Bf16StoredLinear

    layers = [m for m in engine.runner.model.modules() if isinstance(m, (torch.nn.Linear, Bf16StoredLinear))]
    num = sum(m.weight.numel() for m in layers)
    size = sum(m.weight.numel() * m.weight.element_size() for m in layers)
    stored = any(isinstance(m, Bf16StoredLinear) for m in layers)
    dtype = str(layers[0].weight.dtype).removeprefix("torch.") if layers else "?"
    isa = ("avx2" if stored else torch.backends.cpu.get_cpu_capability().lower()) if engine.config.device == "cpu" \
        else "cuda"
    return {"kernel": "bf16_weight_linear" if stored else f"torch linear ({dtype})", "isa": isa,
            "bytes_per_weight": size / num if num else None, "fell_back": False, "reason": engine.dtype_note}


def _quant_path(summary, device: str) -> dict:
    """kernel / ISA / bytes per weight / fell back, and why, for a quantized model (QuantSummary.kernel)."""
    choice = summary.kernel or {}
    main = max(summary.paths, key=summary.paths.get) if summary.paths else "none"
    isa = choice.get("isa") or ("cuda" if device.startswith("cuda") else torch.backends.cpu.get_cpu_capability().lower())
    return {"kernel": choice.get("kernel", main), "isa": isa, "bytes_per_weight": summary.bytes_per_weight,
            "activations": choice.get("activations"), "fell_back": bool(choice.get("fell_back", False)),
            "reason": choice.get("reason", f"{device}: torch's {main} path")}


def kv_fp8(ctx: Context) -> AblationRow:
    """base dtype → FP8 KV cache: bytes per token (so capacity at the same budget), and the logit error
    of prompts run through an e4m3 cache against the same engine with a full-precision cache."""
    cfg, mc = ctx.cfg, ctx.model_config
    n_prompt = cfg.quality_prompt_tokens
    prompts = [synthetic_prompt(n_prompt, mc.vocab_size, seed=300 + i) for i in range(cfg.quality_num_prompts)]
    logits: dict[str, list[torch.Tensor]] = {}
    bytes_per_token: dict[str, float] = {}
    base_name = ""
    for kind in ("base", "fp8"):
        ctx.on_step(f"kv cache: {kind}")
        # The same number of blocks in both formats: only the bytes per token and the cached values differ.
        engine = make_engine(cfg, max_num_seqs=1, max_model_len=n_prompt + 8, num_kv_blocks=blocks(n_prompt + 8) + 2,
                             enable_prefix_caching=False, max_num_batched_tokens=max(256, n_prompt + 8),
                             kv_cache_dtype="fp8" if kind == "fp8" else "auto")
        base_name = base_name or engine.stats().kv_cache_dtype
        bytes_per_token[kind] = engine.runner.kv_cache_bytes / (engine.runner.num_blocks * engine.runner.block_size)
        logits[kind] = [engine_prefill_logits(engine, p) for p in prompts]
    err = compare_logits(logits["base"], logits["fp8"])
    return measured("kv-fp8", f"{base_name} → fp8 KV cache", "(vLLM --kv-cache-dtype fp8)", "KV bytes per token",
                    "bytes", Better.LOWER, base_name, bytes_per_token["base"], "fp8", bytes_per_token["fp8"],
                    kv_tokens_per_gib={k: int(2**30 // v) for k, v in bytes_per_token.items()},
                    logit_error_max_abs=err.max_abs, logit_error_mean_abs=err.mean_abs,
                    top1_agreement_frac=err.top1_agreement_frac, reference_logit_std=err.reference_logit_std,
                    num_quality_positions=err.num_positions,
                    scale="e4m3 values with one fp32 scale per (token, kv head); dequantized block by block "
                          "inside attention")


def roofline(ctx: Context) -> list[dict]:
    """Decode tok/s at each batch size against B·BW / (W + B·ctx·kv_bytes), W and kv_bytes the bytes the
    step reads at the dtype it runs in. BW is the read bandwidth (best of N over a buffer far larger than
    the last-level cache; on the CPU from the one host implementation, probes/active/host_memory.py),
    re-measured just before each point, so that both sides of the ratio see the same load on a shared host."""
    from triage.baseline.host_bandwidth import host_bandwidth
    from triage.core.roofline import decode_tokens_per_s_bound
    from triage.reference_engine.host.microbench import MIB, measure_bandwidth

    cfg, mc = ctx.cfg, ctx.model_config
    gpu = cfg.device.startswith("cuda")
    buffer_bytes = cfg.bandwidth_buffer_bytes or (2048 if gpu else 1024) * MIB
    points: list[dict] = []
    wanted = cfg.roofline_dtypes if cfg.device == "cpu" else ("auto",)
    dtypes = list(dict.fromkeys(cfg.dtype if d == "auto" else d for d in wanted))   # cfg.dtype: the chosen one
    max_b = max(cfg.roofline_batch_sizes)
    max_len = cfg.roofline_prompt_tokens + cfg.roofline_decode_steps + WARM_DECODE_STEPS + 8
    for dtype in dtypes:
        ctx.on_step(f"roofline: {dtype}")
        engine = make_engine(cfg, dtype=dtype, max_num_seqs=max_b, max_model_len=max_len,
                             num_kv_blocks=(max_b + 1) * blocks(max_len), enable_prefix_caching=False,
                             max_num_batched_tokens=max(2048, max_b * cfg.roofline_prompt_tokens))
        warm(engine, mc.vocab_size)
        model = engine.runner.model
        w_bytes = model_weight_bytes(model)
        embed = model.model.embed_tokens.weight
        if getattr(model.lm_head, "weight", None) is not embed:  # decode gathers B embedding rows, it does not
            w_bytes -= embed.numel() * embed.element_size()       # stream the table (unless lm_head is it)
        kv_tok = engine.runner.kv_cache_bytes / (engine.runner.num_blocks * engine.runner.block_size)
        for b in cfg.roofline_batch_sizes:
            ctx.on_step(f"roofline: {dtype} bs={b}")
            drv = Driver(engine)
            for i in range(b):
                drv.add(f"b{b}-{i}", synthetic_prompt(cfg.roofline_prompt_tokens, mc.vocab_size, seed=i),
                        greedy(cfg.roofline_decode_steps + 1 + WARM_DECODE_STEPS))
            while any(not t.token_times_s for t in drv.traces.values()):
                drv.step()
            measured_bw = (measure_bandwidth(cfg.device, buffer_bytes, num_repeats=3, max_time_s=1.0) if gpu
                           else host_bandwidth(buffer_bytes, 3, 1.0))
            bw = measured_bw.read_best_bytes_per_s or measured_bw.best_bytes_per_s
            for _ in range(WARM_DECODE_STEPS):  # the copy evicted the caches: time steady-state decode only
                drv.step()
            t0 = time.perf_counter()
            for _ in range(cfg.roofline_decode_steps):
                drv.step()
            if cfg.device.startswith("cuda"):
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - t0
            drv.run_until_done()
            tok_s = b * cfg.roofline_decode_steps / elapsed
            ctx_tokens = cfg.roofline_prompt_tokens + 1 + WARM_DECODE_STEPS + cfg.roofline_decode_steps / 2
            bound = decode_tokens_per_s_bound(b, bw, w_bytes, ctx_tokens, kv_tok)
            step_bytes = w_bytes + b * ctx_tokens * kv_tok
            points.append({"dtype": dtype, "batch_size": b, "decode_tokens_per_s": tok_s,
                           "bound_tokens_per_s": bound,
                           "roofline_pct": 100.0 * tok_s / bound, "bandwidth_bytes_per_s": bw,
                           "achieved_bytes_per_s": step_bytes * tok_s / b, "weight_bytes": w_bytes,
                           "kv_bytes_per_token": kv_tok, "context_tokens": ctx_tokens})
    return points


def offload(ctx: Context) -> AblationRow:
    change, claim, metric = "CPU offload → GPU FP8", "~20×", "decode tokens/s at bs=1"
    if not ctx.cuda:
        return skipped("offload", change, claim, metric,
                       "no GPU on this host: there is nothing to offload from, and no GPU to run FP8 on")
    cfg, mc = ctx.cfg, ctx.model_config
    tok_s = {}
    for device in ("cpu", "cuda"):
        ctx.on_step(f"offload: {device}")
        engine = make_engine(cfg, device=device, dtype="bfloat16", max_num_seqs=1, max_model_len=64,
                             num_kv_blocks=8, enable_prefix_caching=False)
        if device == "cuda":
            quantize_model(engine.runner.model, "fp8")
        warm(engine, mc.vocab_size)
        tok_s[device] = _decode_tok_s(engine, mc.vocab_size, cfg.quant_decode_tokens)
    return measured("offload", change, claim, metric, "tok/s", Better.HIGHER, "cpu bf16", tok_s["cpu"],
                    "gpu fp8", tok_s["cuda"],
                    note="the whole model on the CPU stands in for full offload; partial offload lies between")


def fp4(ctx: Context) -> AblationRow:
    return skipped("fp4", "FP8 → FP4", "~2.9× (B200, MLPerf estimate)", "tokens/s",
                   "the reference engine has no FP4 path, and FP4 tensor cores need a Blackwell GPU")


def cold_start(ctx: Context) -> AblationRow:
    """Two starts of `triage serve` in turn: the first (imports and weights from a colder page cache) against
    the second. The reference engine reads local weights, so the seed's 40x (a download on every start against
    a cached model) is not what this measures; `triage coldstart` breaks a real server's start into phases."""
    from triage.engines.reference import REFERENCE
    from triage.engines.startup_log import parse_startup
    from triage.reference_engine.serve.launcher import start_reference_server

    change, claim, metric = "first start → warm start", "~40× startup (download → cached)", "time to ready"
    ready, phases = [], []
    for label in ("first", "warm"):
        ctx.on_step(f"cold start: {label} start")
        tic = time.perf_counter()
        with start_reference_server(model=ctx.cfg.model, extra_args=("--device", ctx.cfg.device),
                                    keep_log=True) as server:
            ready.append(time.perf_counter() - tic)
        text = server.log_path.read_text(errors="replace").splitlines()
        server.log_path.unlink(missing_ok=True)
        startup = parse_startup([(None, line) for line in text], REFERENCE)
        phases.append({p.phase: p.seconds for p in startup.phases if p.seconds is not None})
    return measured("cold-start", change, claim, metric, "s", Better.LOWER, "first start", round(ready[0], 3),
                    "warm start", round(ready[1], 3), first_phases_s=phases[0], warm_phases_s=phases[1],
                    note="the reference engine loads local weights: no download to cache; the first start pays "
                         "the colder page cache")
