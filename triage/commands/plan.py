"""`triage plan`: VRAM fit, KV capacity, roofline speed, fleet size, cost, and vLLM flags."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import emit, format_option, funnel, json_option
from triage.core.report import ReportKind, Target, new_report
from triage.core.specs import spec_keys
from triage.plan.inputs import KV_CACHE_DTYPES, WEIGHT_DTYPES
from triage.plan.presets import PRESETS
from triage.probes.host import host_info

_TRAFFIC = "Traffic"
_GPU = "GPU"
_SERVER = "Server (as vLLM takes them)"


@funnel
def plan(
    model: str = typer.Option(None, "--model", "-m", help=f"A preset ({', '.join(PRESETS)}), a local Hugging "
                              "Face model directory, or a config.json."),
    gpu: str = typer.Option(None, "--gpu", help=f"A spec-table GPU: {', '.join(spec_keys())}.",
                            rich_help_panel=_GPU),
    vram_gb: float = typer.Option(None, "--vram-gb", help="GPU memory in GB as on the spec sheet (read as "
                                  "GiB); overrides --gpu's.", rich_help_panel=_GPU),
    bandwidth_tbs: float = typer.Option(None, "--bandwidth-tbs", help="Memory bandwidth in TB/s; overrides "
                                        "--gpu's.", rich_help_panel=_GPU),
    tflops: float = typer.Option(None, "--tflops", help="Peak dense tensor TFLOP/s at the compute dtype; "
                                 "overrides --gpu's.", rich_help_panel=_GPU),
    dtype: str = typer.Option(None, "--dtype", help=f"Weight dtype: {', '.join(WEIGHT_DTYPES)} (default bf16).",
                              rich_help_panel=_SERVER),
    kv_cache_dtype: str = typer.Option(None, "--kv-cache-dtype", help="KV cache dtype: "
                                       f"{', '.join(KV_CACHE_DTYPES)} (default auto).", rich_help_panel=_SERVER),
    tp: int = typer.Option(None, "--tp", "--tensor-parallel-size", help="Tensor-parallel size (default: the "
                           "smallest that fits with headroom).", rich_help_panel=_SERVER),
    max_model_len: int = typer.Option(None, "--max-model-len", help="Context length to plan for (default: the "
                                      "model's, lowered to what the KV cache holds).", rich_help_panel=_SERVER),
    gpu_memory_utilization: float = typer.Option(None, "--gpu-memory-utilization", help="Share of GPU memory the server may use "
                                                 "(default 0.9).",
                                                 rich_help_panel=_SERVER),
    max_num_seqs: int = typer.Option(None, "--max-num-seqs", help="Cap on the batch (default 256).",
                                     rich_help_panel=_SERVER),
    qps: float = typer.Option(None, "--qps", help="Target requests per second, for the fleet size.",
                              rich_help_panel=_TRAFFIC),
    input_len: int = typer.Option(None, "--input-len", help="Prompt tokens per request (default 1024).",
                                  rich_help_panel=_TRAFFIC),
    output_len: int = typer.Option(None, "--output-len", help="Output tokens per request (default 256).",
                                   rich_help_panel=_TRAFFIC),
    concurrency: int = typer.Option(None, "--concurrency", help="Requests in flight across the fleet.",
                                    rich_help_panel=_TRAFFIC),
    price_per_gpu_hour: float = typer.Option(None, "--price-per-gpu-hour", help="USD per GPU-hour, for cost "
                                             "per token.", rich_help_panel=_TRAFFIC),
    api_price_per_mtok: float = typer.Option(None, "--api-price-per-mtok", help="USD per 1M output tokens of "
                                             "a hosted API, for the break-even.", rich_help_panel=_TRAFFIC),
    mbu: float = typer.Option(None, "--mbu", help="Share of spec bandwidth decode reaches (default 0.7)."),
    mfu: float = typer.Option(None, "--mfu", help="Share of spec FLOP/s prefill reaches (default 0.5)."),
    from_diagnose: Path = typer.Option(None, "--from-diagnose", help="Fill GPU and server settings from a "
                                       "diagnose report; flags given here win."),
    json_path: Path = json_option(),
    fmt: str = format_option(ReportKind.PLAN),
) -> int:
    """Does the model fit, how much KV cache is left, how fast can it go, and how many GPUs for a QPS.

    Arithmetic over spec-sheet figures (nothing is measured); every assumption is in the report.
    """
    from triage.plan.section import RawOptions, plan_section

    section = plan_section(RawOptions(
        model=model, gpu=gpu, vram_gb=vram_gb, bandwidth_tbs=bandwidth_tbs, tflops=tflops, dtype=dtype,
        kv_cache_dtype=kv_cache_dtype, tp=tp, max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs, qps=qps,
        input_len=input_len, output_len=output_len, concurrency=concurrency,
        price_per_gpu_hour=price_per_gpu_hour, api_price_per_mtok=api_price_per_mtok, mbu=mbu, mfu=mfu,
        from_diagnose=from_diagnose,
    ))
    model_id = section["model"]["hf_id"] or section["model"]["name"]
    report = new_report(ReportKind.PLAN, host_info(), Target(model=model_id), plan=section)
    emit(report, json_path, fmt)
    return 0
