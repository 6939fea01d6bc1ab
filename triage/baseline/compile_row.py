"""The eager → compiled row: the decode step through torch.compile (reference_engine/engine/compiled_step.py),
what it gains at bs=1 and at the largest decode batch, and the start-up seconds it costs, with a cold and a warm
Inductor cache.

Both compiles run in this process on one model: the first into an empty cache directory, the second into the same
one after dropping everything Dynamo and Inductor keep in memory, so that only the on-disk cache is warm. A
second start of `triage serve --compile on` also re-imports torch's compiler; `triage coldstart` times that."""
from __future__ import annotations

import tempfile
import time

import torch

from triage.baseline.ablation_context import Context
from triage.baseline.engine_driver import blocks, make_engine, steady_decode_tok_s, warm
from triage.baseline.results import AblationRow, Better, measured, skipped

CHANGE, METRIC = "eager → compiled decode step", "decode tokens/s at bs=1"
PROMPT_TOKENS = 32


def compile_step(ctx: Context) -> AblationRow:
    cfg, mc = ctx.cfg, ctx.model_config
    batch = max(cfg.compile_batch_sizes)
    max_len = PROMPT_TOKENS + cfg.compile_decode_steps + 8
    engine = make_engine(cfg, max_num_seqs=batch, max_model_len=max_len, num_kv_blocks=batch * blocks(max_len) + 2,
                         enable_prefix_caching=False)
    warm(engine, mc.vocab_size)
    ctx.on_step("compile: eager decode")
    eager = {b: _decode_tok_s(engine, mc.vocab_size, b, cfg.compile_decode_steps) for b in cfg.compile_batch_sizes}
    with tempfile.TemporaryDirectory(prefix="triage-inductor-") as cache_dir:
        ctx.on_step("compile: cold cache")
        _forget_compiled_code()     # a graph of the same shapes compiled earlier in this process would be reused
        cold_s, why = _compile(engine, cache_dir)
        if why is not None:
            return skipped("compile", CHANGE, None, METRIC, why)
        ctx.on_step("compile: compiled decode")
        compiled = {b: _decode_tok_s(engine, mc.vocab_size, b, cfg.compile_decode_steps)
                    for b in cfg.compile_batch_sizes}
        ctx.on_step("compile: warm cache")
        _forget_compiled_code()
        warm_s, why = _compile(engine, cache_dir)
    return measured(
        "compile", CHANGE, None, METRIC, "tok/s", Better.HIGHER, "eager", eager[1], "compiled", compiled[1],
        decode_step="eager → compiled",
        decode_tok_s={f"bs{b}": {"eager": eager[b], "compiled": compiled[b], "gain": compiled[b] / eager[b]}
                      for b in cfg.compile_batch_sizes},
        compile_s={"cold_cache": cold_s, "warm_cache": warm_s}, buckets=list(cfg.compile_batch_sizes),
        path={"dtype": engine.stats().dtype, "weight_storage": engine.weight_storage,
              "compiled": "torch.compile (Inductor) on " + engine.config.device},
        note="both compiles in one process; the warm one after dropping the in-memory caches, so only Inductor's "
             "on-disk cache helps it (a real second start also re-imports the compiler: `triage coldstart`)")


def _compile(engine, cache_dir: str) -> tuple[float | None, str | None]:
    """(seconds, None) with the engine's decode step compiled for the row's batches, or (None, why not)."""
    from triage.reference_engine.engine.compiled_step import CompiledDecode, inductor_cache_dir

    runner = engine.runner
    runner.compiled = None
    inductor_cache_dir(cache_dir)
    buckets = tuple(sorted({1, engine.config.max_num_seqs}))
    tic = time.perf_counter()
    try:
        compiled = CompiledDecode(runner.model, buckets, runner.device)
        with torch.inference_mode():
            compiled.warm_up(runner.scratch_step, buckets)
    except Exception as e:  # noqa: BLE001 - no C++ compiler, an op Inductor cannot trace: the row says so
        return None, f"the decode step could not be compiled here ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
    runner.compiled = compiled
    return time.perf_counter() - tic, None


def _forget_compiled_code() -> None:
    from torch._inductor.utils import clear_inductor_caches

    torch._dynamo.reset()
    clear_inductor_caches()


def _decode_tok_s(engine, vocab: int, batch: int, steps: int) -> float:
    return steady_decode_tok_s(engine, batch, steps, vocab, PROMPT_TOKENS, warm_steps=1, seed=300)
