"""`triage baseline`: microbenchmarks, then each ablation row, then the report section."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import torch

from triage.baseline import compile_row, model_rows, serving_rows
from triage.baseline.ablation_context import Context
from triage.baseline.config import ROW_KEYS, BaselineConfig
from triage.baseline.host_bandwidth import host_bandwidth
from triage.baseline.results import AblationRow, failed
from triage.baseline.section import build_section
from triage.core.errors import EngineError, UsageError
from triage.reference_engine.host.dtype_choice import choose_dtype
from triage.reference_engine.host.microbench import run_microbench
from triage.reference_engine.host.threads import fit_num_threads
from triage.reference_engine.models.loader import reuse_dummy_weights
from triage.reference_engine.models.model_config import load_model_config

# key -> (function, change, the article's claim, metric): the order of the article's before/after table, then the extras.
ROWS: dict[str, tuple[Callable, str, str | None, str]] = {
    "offload": (model_rows.offload, "CPU offload → GPU FP8", "~20×", "decode tokens/s"),
    "batching": (serving_rows.batching, "static → continuous batching", "~2× throughput", "output tokens/s"),
    "weights": (model_rows.weights, "bf16 → fp8 → int4 weights", "~1.7×", "decode tokens/s"),
    "fp4": (model_rows.fp4, "FP8 → FP4", "~2.9×", "tokens/s"),
    "attention": (model_rows.attention, "standard → flash attention", "~2.2× TTFT", "TTFT"),
    "kv-layout": (serving_rows.kv_layout, "contiguous → paged KV cache", "4× concurrency", "max concurrency"),
    "cold-start": (model_rows.cold_start, "first start → warm start", "~40×", "time to ready"),
    "kv-fp8": (model_rows.kv_fp8, "fp8 KV cache", None, "KV bytes per token"),
    "prefix-cache": (serving_rows.prefix_cache, "prefix caching off → on", None, "TTFT"),
    "chunked-prefill": (serving_rows.chunked_prefill, "chunked prefill off → on", None, "TPOT p99"),
    "compile": (compile_row.compile_step, compile_row.CHANGE, None, compile_row.METRIC),
}


# Errors that fail one row (reported with the reason) instead of the run: the engine refusing a
# workload this model cannot take (EngineError: e.g. a context longer than the model allows), or a
# kernel or shape failure. Usage errors still stop the run.
_ROW_ERRORS = (EngineError, RuntimeError, ValueError, MemoryError)


def validate(cfg: BaselineConfig) -> None:
    unknown = [r for r in cfg.rows if r not in ROW_KEYS]
    if unknown:
        raise UsageError(f"unknown row(s) {', '.join(unknown)}; choose from {', '.join(ROW_KEYS)}")
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda, but torch sees no CUDA GPU on this host; use --device cpu")
    if not (cfg.device == "cpu" or cfg.device.startswith("cuda")):
        raise UsageError(f"--device {cfg.device!r}: use cpu or cuda")
    if cfg.num_threads is not None and cfg.num_threads < 1:
        raise UsageError(f"--threads {cfg.num_threads}: use a positive number of threads")
    if cfg.dtype not in ("auto", "bfloat16", "float16", "float32"):
        raise UsageError(f"--dtype {cfg.dtype!r}: use auto, bfloat16, float16 or float32")


def num_steps(cfg: BaselineConfig) -> int:
    return 1 + len(cfg.rows)


def run_baseline(cfg: BaselineConfig, on_step: Callable[[str], None] | None = None,
                 on_row_done: Callable[[str], None] | None = None) -> dict:
    """Run the microbenchmarks and the selected rows; return the report's ``baseline`` section."""
    validate(cfg)
    on_step = on_step or (lambda _m: None)
    on_row_done = on_row_done or (lambda _k: None)
    try:
        model_config = load_model_config(cfg.model)
    except EngineError as e:
        raise UsageError(str(e)) from None
    threads_before = torch.get_num_threads()
    if cfg.num_threads is None:             # torch's default (a thread per core) stalls on a busy host
        threads, why = fit_num_threads()
        cfg = dataclasses.replace(cfg, num_threads=threads)
    else:
        why = f"{cfg.num_threads}, as asked (--threads)"
    torch.set_num_threads(cfg.num_threads)
    try:
        # Chosen once (a timed matmul per allowed dtype), then every row's engine is given the result.
        choice = choose_dtype(cfg.dtype, model_config.torch_dtype, cfg.device)
        on_step(f"compute dtype: {choice.name}")
        with reuse_dummy_weights():            # the rows build a dozen engines of the same model
            section = _run(dataclasses.replace(cfg, dtype=choice.name), model_config, on_step, on_row_done)
    finally:
        torch.set_num_threads(threads_before)
    section["dtype_requested"] = cfg.dtype
    section["dtype_note"] = choice.note
    section["dtype_matmul_s"] = choice.timings_s
    section["notes"].insert(0, f"compute dtype: {choice.note}")
    if section["tables"]:                      # and where a person reads the table
        section["tables"][0]["notes"].insert(0, f"compute dtype {choice.note}")
    section["notes"].insert(0, f"torch threads: {why}")
    return section


def _run(cfg: BaselineConfig, model_config, on_step: Callable[[str], None],
         on_row_done: Callable[[str], None]) -> dict:
    started = time.perf_counter()
    on_step("microbenchmarks")
    devices = ["cpu"] + (["cuda"] if cfg.device.startswith("cuda") else [])
    micro = run_microbench(devices, quick=cfg.bandwidth_buffer_bytes is not None, on_step=on_step,
                           buffer_bytes=cfg.bandwidth_buffer_bytes, matmul_n=cfg.matmul_n,
                           host_bandwidth=host_bandwidth)
    on_row_done("microbench")
    ctx = Context(cfg=cfg, model_config=model_config, microbench=micro, on_step=on_step)
    rows: list[AblationRow] = []
    roofline_points: list[dict] = []
    durations: dict[str, float] = {}
    for key in cfg.rows:
        t0 = time.perf_counter()
        if key == "roofline":
            try:
                roofline_points = model_rows.roofline(ctx)
            except _ROW_ERRORS as e:
                ctx.extras["roofline_error"] = f"{type(e).__name__}: {e}"
        else:
            fn, change, claim, metric = ROWS[key]
            try:
                result = fn(ctx)
            except _ROW_ERRORS as e:  # one broken row must not lose the others
                result = failed(key, change, claim, metric, f"{type(e).__name__}: {e}")
            rows.extend(result if isinstance(result, list) else [result])
        durations[key] = time.perf_counter() - t0
        on_row_done(key)
    return build_section(cfg, ctx, rows, roofline_points, durations, time.perf_counter() - started)

