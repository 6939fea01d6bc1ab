"""GPU001 (vram-spillover): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU001/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import GpuDevice, ServerProcessData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._gpu_shared import gpu_key
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.fmt import gib, pct
from triage.rules.registry import rule


@rule("GPU001", "vram-spillover", Severity.HIGH, ("gpu", "server_process"), RuleDoc(
    what="VRAM is (nearly) full and the server shows signs of offloading to the CPU: an explicit "
         "`--cpu-offload-gb`, the server's host RSS growing during the window, or a pegged server thread "
         "while the GPU is starved.",
    why="When weights or KV do not fit, frameworks quietly move layers to host memory. Host-to-GPU "
        "transfers run 10-50x slower than HBM, so decode collapses to a few tokens/s ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong GPU: Your Model Doesn't Fit in VRAM').",
    example="gpu.gpus[0].memory_used_frac = 0.99, server_process.rss_growth_bytes = 6.4e9, "
            "server_process.max_thread_cpu_pct = 100, gpu.gpus[0].utilization_gpu_pct = 12",
    fix="Quantize (`--quantization fp8` on Ada, Hopper and Blackwell (compute capability >= 8.9), AWQ/GPTQ INT4 elsewhere), shard over more GPUs "
        "(`--tensor-parallel-size`), or use a bigger GPU. `triage plan` shows the fit.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Wrong GPU: Your Model Doesn't Fit in VRAM' (wrong GPU: model doesn't fit)", "'Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit' (2026-06-15): the wrong GPU can look cheap until it spills",
                "claim:vllm.cpu-offload-gb", "claim:vllm.fp8-from-sm89", "claim:vllm.quantization-fp8-deprecated",
                "claim:vllm.quantization-needs-config"),
), thresholds=("GPU001.vram_used_frac", "GPU001.rss_growth_bytes", "GPU001.cpu_busy_pct", "GPU001.gpu_starved_util_pct"))
def gpu001(ctx: Context) -> Hit | None:
    full = _full_gpus(ctx)
    if not full:
        return None
    proc = ctx.need(ServerProcessData)
    evidence: dict[str, Any] = {f"{gpu_key(g)}.memory_used_frac": round(f, 3) for g, f in full}
    signals = _offload_signals(ctx, proc, full, evidence)
    if not signals:
        if proc.rss_bytes_start is None and proc.max_thread_cpu_pct is None and not proc.cmdline:
            raise MissingInput("VRAM is full but server_process has no RSS, thread CPU or command line to tell "
                               "offload from a healthy, preallocated KV pool")
        return None
    return _spillover(ctx, full, evidence, signals)


def _full_gpus(ctx: Context) -> list[tuple[GpuDevice, float]]:
    """The serving GPUs whose VRAM is (nearly) full, with the used fraction; MissingInput when none measured it."""
    full = []
    measured = False
    for g in ctx.serving_gpus():
        used, total = g.memory_used_bytes, g.memory_total_bytes
        if used is None or not total:
            continue
        measured = True
        if used / total >= ctx.th("GPU001.vram_used_frac"):
            full.append((g, used / total))
    if not measured:
        raise MissingInput("gpu memory_used_bytes/memory_total_bytes were not measured")
    return full


def _offload_signals(ctx: Context, proc: ServerProcessData, full: list[tuple[GpuDevice, float]],
                     evidence: dict[str, Any]) -> list[str]:
    """The signs that the server offloads to the CPU, in words; their values are added to `evidence`."""
    signals = _cpu_offload_flag(proc, evidence)
    start, end = proc.rss_bytes_start, proc.rss_bytes_end
    if start is not None and end is not None:
        growth = end - start
        if growth >= ctx.th("GPU001.rss_growth_bytes"):
            evidence["server_process.rss_growth_bytes"] = growth
            signals.append(f"host RSS grew {gib(growth)} in {proc.window_s} s")
    thread = proc.max_thread_cpu_pct
    utils = [g.utilization_gpu_pct for g, _ in full if g.utilization_gpu_pct is not None]
    if thread is not None and utils and thread >= ctx.th("GPU001.cpu_busy_pct") and \
            max(utils) < ctx.th("GPU001.gpu_starved_util_pct"):
        evidence["server_process.max_thread_cpu_pct"] = thread
        evidence["gpu.utilization_gpu_pct_max"] = max(utils)
        signals.append(f"a server thread at {thread:.0f}% CPU while the GPU runs at {max(utils):.0f}%")
    return signals


def _cpu_offload_flag(proc: ServerProcessData, evidence: dict[str, Any]) -> list[str]:
    """A positive `--cpu-offload-gb` on the server's command line."""
    signals = []
    cmdline = [str(a) for a in proc.cmdline or []]
    for i, arg in enumerate(cmdline):
        value = arg.split("=", 1)[1] if arg.startswith("--cpu-offload-gb=") else (
            cmdline[i + 1] if arg == "--cpu-offload-gb" and i + 1 < len(cmdline) else None)
        if value is not None:
            try:
                if float(value) > 0:
                    evidence["server_process.cmdline.cpu_offload_gb"] = float(value)
                    signals.append(f"--cpu-offload-gb {value}")
            except ValueError:
                pass
    return signals


def _spillover(ctx: Context, full: list[tuple[GpuDevice, float]], evidence: dict[str, Any],
               signals: list[str]) -> Hit:
    native = ctx.fp8_native()[0] if any(g.compute_capability for g, _ in full) else False
    knob = "quantization_fp8" if native else "quantization_int4"
    cmds, note = engine_flags({knob: None}, ctx.engine())
    plan = ctx.plan_command()
    certainty = Certainty.CONFIRMED if "server_process.cmdline.cpu_offload_gb" in evidence else Certainty.LIKELY
    return Hit(
        title="The model spills out of VRAM into host memory",
        message=f"VRAM is {pct(max(f for _, f in full))} used and the server offloads: {'; '.join(signals)}.",
        evidence=evidence, certainty=certainty, impact=0.95,
        fix=Fix(("Make the model fit: quantize it " + ("to FP8 (this GPU supports it)" if knob == "quantization_fp8"
                 else "to INT4 (AWQ or GPTQ checkpoint)") + ", shard it with more tensor parallelism, or move to a "
                 "bigger GPU; drop any --cpu-offload-gb. "
                 + (f"`{plan}` gives the numbers." if plan else "`triage plan --model M --gpu G` gives the numbers.")
                 + note), cmds + ((plan,) if plan else ())),
    )
