"""`triage plan`: VRAM fit, KV capacity, roofline speed, fleet size, cost, and vLLM flags."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import OptionSpec, emit, format_option, funnel, json_option, option_groups
from triage.core.model_presets import PRESETS
from triage.core.report import ReportKind
from triage.core.specs import spec_keys
from triage.plan import assumptions as A
from triage.plan.inputs import KV_CACHE_DTYPES, WEIGHT_DTYPES, RawOptions

_TRAFFIC = "Traffic"
_GPU = "GPU"
_SERVER = "Server (as vLLM takes them)"

PLAN_OPTIONS: OptionSpec = {
    "model": (str, typer.Option(None, "--model", "-m", help=f"A preset ({', '.join(PRESETS)}), a local Hugging "
        "Face model directory, or a config.json.")),
    "gpu": (str, typer.Option(None, "--gpu", help=f"A spec-table GPU: {', '.join(spec_keys())}.",
        rich_help_panel=_GPU)),
    "vram_gb": (float, typer.Option(None, "--vram-gb", help="GPU memory in GB as on the spec sheet (read as "
        "GiB); overrides --gpu's.", rich_help_panel=_GPU)),
    "bandwidth_tbs": (float, typer.Option(None, "--bandwidth-tbs", help="Memory bandwidth in TB/s; overrides "
        "--gpu's.", rich_help_panel=_GPU)),
    "tflops": (float, typer.Option(None, "--tflops", help="Peak dense tensor TFLOP/s at the compute dtype; "
        "overrides --gpu's.", rich_help_panel=_GPU)),
    "dtype": (str, typer.Option(None, "--dtype", help=f"Weight dtype: {', '.join(WEIGHT_DTYPES)} (default bf16).",
        rich_help_panel=_SERVER)),
    "kv_cache_dtype": (str, typer.Option(None, "--kv-cache-dtype", help="KV cache dtype: "
        f"{', '.join(KV_CACHE_DTYPES)} (default auto).", rich_help_panel=_SERVER)),
    "tp": (int, typer.Option(None, "--tp", "--tensor-parallel-size", help="Tensor-parallel size (default: the "
        "smallest that fits with headroom).", rich_help_panel=_SERVER)),
    "max_model_len": (int, typer.Option(None, "--max-model-len", help="Context length to plan for (default: the "
        "model's, lowered to what the KV cache holds).", rich_help_panel=_SERVER)),
    "gpu_memory_utilization": (float, typer.Option(None, "--gpu-memory-utilization", help="Share of GPU memory the server may use "
        f"(default {A.DEFAULT_GPU_MEMORY_UTILIZATION:g}, vLLM {A.PLAN_VLLM_VERSION}'s).",
        rich_help_panel=_SERVER)),
    "max_num_seqs": (int, typer.Option(None, "--max-num-seqs", help="Cap on the batch (default: vLLM "
        f"{A.PLAN_VLLM_VERSION}'s own for the GPU, 1024 on GPUs of 70 GiB or more other than the A100 and GB10, "
        "256 on the rest).",
        rich_help_panel=_SERVER)),
    "qps": (float, typer.Option(None, "--qps", help="Target requests per second, for the fleet size.",
        rich_help_panel=_TRAFFIC)),
    "input_len": (int, typer.Option(None, "--input-len", help="Prompt tokens per request (default "
        f"{A.DEFAULT_INPUT_LEN}).",
        rich_help_panel=_TRAFFIC)),
    "output_len": (int, typer.Option(None, "--output-len", help="Output tokens per request (default "
        f"{A.DEFAULT_OUTPUT_LEN}).",
        rich_help_panel=_TRAFFIC)),
    "concurrency": (int, typer.Option(None, "--concurrency", help="Requests in flight across the fleet.",
        rich_help_panel=_TRAFFIC)),
    "price_per_gpu_hour": (float, typer.Option(None, "--price-per-gpu-hour", help="USD per GPU-hour, for cost "
        "per token.", rich_help_panel=_TRAFFIC)),
    "api_price_per_mtok": (float, typer.Option(None, "--api-price-per-mtok", help="USD per 1M output tokens of "
        "a hosted API, for the break-even.", rich_help_panel=_TRAFFIC)),
    "mbu": (float, typer.Option(None, "--mbu", help="Share of spec bandwidth decode reaches "
        f"(default {A.DEFAULT_MBU:g}).")),
    "mfu": (float, typer.Option(None, "--mfu", help="Share of spec FLOP/s prefill reaches "
        f"(default {A.DEFAULT_MFU:g}).")),
    "from_diagnose": (Path, typer.Option(None, "--from-diagnose", help="Fill GPU and server settings from a "
        "diagnose report; flags given here win.")),
}


@funnel
@option_groups(raw=(RawOptions, PLAN_OPTIONS))
def plan(raw: RawOptions, json_path: Path = json_option(), fmt: str = format_option(ReportKind.PLAN)) -> int:
    """Does the model fit, how much KV cache is left, how fast can it go, and how many GPUs for a QPS.

    Arithmetic over spec-sheet figures (nothing is measured); every assumption is in the report.
    """
    from triage.plan.section import plan_report

    emit(plan_report(raw), json_path, fmt)
    return 0
