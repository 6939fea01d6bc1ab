"""The plan's inputs: flags, optionally filled from a diagnose report, validated into PlanInputs.

Precedence: an explicit flag wins, then what `--from-diagnose` found, then the default. `sources`
records which one each value came from, and the report repeats it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.core import specs
from triage.core.errors import UsageError
from triage.core.specs import GpuSpec
from triage.engines import vllm as vllm_engine
from triage.plan import assumptions as A
from triage.plan.model_shape import ModelShape, model_for_served_name, preset_names, resolve_model

if TYPE_CHECKING:
    from triage.core.probe_data import GpuData

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
# vLLM's --kv-cache-dtype spellings -> storage dtype; "auto" follows the activations (16 bit).
KV_CACHE_DTYPES = {"auto": None, "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16",
                   "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


@dataclass(frozen=True, slots=True)
class RawOptions:
    """What the user typed; None means 'not given'."""
    model: str | None = None
    gpu: str | None = None
    vram_gb: float | None = None
    bandwidth_tbs: float | None = None
    tflops: float | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    tp: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    qps: float | None = None
    input_len: int | None = None
    output_len: int | None = None
    concurrency: int | None = None
    price_per_gpu_hour: float | None = None
    api_price_per_mtok: float | None = None
    mbu: float | None = None
    mfu: float | None = None
    from_diagnose: Path | None = None


@dataclass(frozen=True, slots=True)
class PlanInputs:
    model: ModelShape
    gpu: GpuSpec
    dtype: str
    kv_cache_dtype: str                  # vLLM spelling, e.g. "auto" or "fp8"
    kv_storage_dtype: str                # bytes-wise: bf16 | fp16 | fp8
    tp: int | None
    max_model_len: int | None
    gpu_memory_utilization: float
    max_num_seqs: int
    input_len: int
    output_len: int
    qps: float | None
    concurrency: int | None
    price_per_gpu_hour: float | None
    api_price_per_mtok: float | None
    mbu: float
    mfu: float
    num_gpus_available: int | None = None
    sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def context_tokens(self) -> int:
        return self.input_len + self.output_len

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.name, "model_source": self.model.source, "gpu": self.gpu.key,
            "dtype": self.dtype, "kv_cache_dtype": self.kv_cache_dtype, "tp": self.tp,
            "max_model_len": self.max_model_len, "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_seqs": self.max_num_seqs, "input_len": self.input_len, "output_len": self.output_len,
            "qps": self.qps, "concurrency": self.concurrency, "price_per_gpu_hour": self.price_per_gpu_hour,
            "api_price_per_mtok": self.api_price_per_mtok, "mbu": self.mbu, "mfu": self.mfu,
            "num_gpus_available": self.num_gpus_available, "sources": dict(self.sources),
        }


@dataclass(frozen=True, slots=True)
class DiagnoseFacts:
    """What a diagnose report says about the GPU and the server, as plan inputs."""
    gpu: GpuSpec | None = None
    num_gpus: int | None = None
    server: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _gpu_from_probe(data: GpuData | None) -> tuple[GpuSpec | None, int | None, list[str]]:
    gpus = [g for g in (data.gpus if data is not None else ()) if not g.lost]
    if not gpus:
        return None, None, ["the diagnose report's gpu probe lists no GPU"]
    first = gpus[0]
    name = str(first.name or "")
    mem = first.memory_total_bytes
    spec = specs.match_nvml_name(name, mem if isinstance(mem, int) else None)
    if spec is None:
        return None, len(gpus), [f"GPU {name!r} from the diagnose report is not in the spec table"]
    notes = [f"GPU {name!r} from the diagnose report matched spec entry {spec.key}"]
    if isinstance(mem, int) and mem > 0:
        spec = dataclasses.replace(spec, vram_bytes=mem, source=spec.source + "; memory as NVML measured it")
        notes.append(f"using the measured memory total {mem / A.GIB:.1f} GiB")
    return spec, len(gpus), notes


def read_diagnose(path: Path) -> DiagnoseFacts:
    from triage.core.report_io import read_report, to_dict

    report = read_report(path)
    probes = {p.name: p for p in report.probes}
    notes: list[str] = []
    gpu, num_gpus = None, None
    probe = probes.get("gpu")
    if probe is not None and probe.status.value == "ok":
        gpu, num_gpus, notes = _gpu_from_probe(probe.data)
    elif probe is not None:
        notes.append(f"the diagnose report's gpu probe was {probe.status.value}: {probe.reason}")
    else:
        notes.append("the diagnose report has no gpu probe")
    server: dict[str, Any] = {}
    sc = probes.get("server_config")
    if sc is not None and sc.status.value == "ok":
        server = {k: v for k, v in to_dict(sc.data).items() if v is not None} if sc.data is not None else {}
    if not server.get("model") and report.target.model:
        server["model"] = report.target.model
    return DiagnoseFacts(gpu=gpu, num_gpus=num_gpus, server=server, notes=tuple(notes))


def dtype_from_server(server: dict[str, Any]) -> str | None:
    """The weight dtype a vLLM server config implies (quantization method first, then --dtype)."""
    quant = str(server.get("quantization") or "").lower()
    if quant:
        if "fp8" in quant or quant == "modelopt":
            return "fp8"
        if any(k in quant for k in ("awq", "gptq", "marlin", "bitsandbytes", "int4")):
            return "int4"
        if "int8" in quant or "w8a8" in quant or quant == "smoothquant":
            return "int8"
        return None
    dtype = str(server.get("dtype") or "").lower()
    return {"float16": "fp16", "half": "fp16", "fp16": "fp16"}.get(dtype, "bf16" if dtype else None)


def _base_gpu(raw: RawOptions, facts: DiagnoseFacts, sources: dict[str, str]) -> GpuSpec | None:
    """--gpu's spec, else the diagnosed GPU, else None; `sources` records which."""
    if raw.gpu is not None:
        base = specs.get_spec(raw.gpu)
        if base is None:
            raise UsageError(f"unknown GPU {raw.gpu!r}; choose one of {', '.join(specs.spec_keys())}, "
                             "or give --vram-gb, --bandwidth-tbs and --tflops")
        sources["gpu"] = "flag"
        return base
    if facts.gpu is not None:
        sources["gpu"] = "diagnose"
    return facts.gpu


def _custom_gpu(overrides: dict[str, float | None], sources: dict[str, str]) -> GpuSpec:
    """No GPU named: one described wholly by --vram-gb, --bandwidth-tbs and --tflops."""
    missing = [f"--{k.replace('_', '-')}" for k, v in overrides.items() if v is None]
    if missing:
        raise UsageError(f"no GPU given: pass --gpu (one of {', '.join(specs.spec_keys())}), "
                         f"--from-diagnose REPORT.json, or all of --vram-gb, --bandwidth-tbs and "
                         f"--tflops (missing {', '.join(missing)})")
    sources["gpu"] = "flag"
    return GpuSpec(key="custom", name="custom GPU", architecture="unknown", compute_capability=(0, 0),
                   vram_bytes=0, hbm_bandwidth_bytes_per_s=0.0, bf16_flops_per_s=0.0,
                   fp16_flops_per_s=0.0, fp8_flops_per_s=None, int8_ops_per_s=None,
                   nvlink_bytes_per_s=None, tdp_w=0.0, source="given on the command line",
                   kind="user-given")


def _gpu_changes(raw: RawOptions, base: GpuSpec) -> dict[str, Any]:
    """The spec fields --vram-gb, --bandwidth-tbs and --tflops replace."""
    changes: dict[str, Any] = {}
    if raw.vram_gb is not None:
        changes["vram_bytes"] = int(raw.vram_gb * A.GIB)
    if raw.bandwidth_tbs is not None:
        changes["hbm_bandwidth_bytes_per_s"] = raw.bandwidth_tbs * 1e12
    if raw.tflops is not None:
        t = raw.tflops * 1e12
        changes.update(bf16_flops_per_s=t, fp16_flops_per_s=t,
                       fp8_flops_per_s=t if base.fp8_flops_per_s is not None else None,
                       int8_ops_per_s=t if base.int8_ops_per_s is not None else None)
    return changes


def _resolve_gpu(raw: RawOptions, facts: DiagnoseFacts, sources: dict[str, str]) -> GpuSpec:
    base = _base_gpu(raw, facts, sources)
    overrides = {"vram_gb": raw.vram_gb, "bandwidth_tbs": raw.bandwidth_tbs, "tflops": raw.tflops}
    if base is None:
        base = _custom_gpu(overrides, sources)
    for name, value in overrides.items():
        if value is not None and value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive (got {value})")
    changes = _gpu_changes(raw, base)
    if changes:
        given = ", ".join(k for k in overrides if overrides[k] is not None)
        changes["source"] = f"{base.source}; overridden on the command line ({given})"
        changes["kind"] = "user-given" if base.key == "custom" else f"{base.kind} + user overrides"
        base = dataclasses.replace(base, **changes)
    return base


def _server_number(server: dict[str, Any], key: str, cast: type, notes: list[str]) -> Any:
    """A numeric server_config value, or None (with a note) when the report holds something else."""
    value = server.get(key)
    if value is None or isinstance(value, bool):
        return None
    try:
        return cast(value)
    except (TypeError, ValueError):
        notes.append(f"ignored server_config {key}={value!r} from the diagnose report: not a number")
        return None


def _pick(name: str, flag: Any, diag: Any, default: Any, sources: dict[str, str]) -> Any:
    if flag is not None:
        sources[name] = "flag"
        return flag
    if diag is not None:
        sources[name] = "diagnose"
        return diag
    sources[name] = "default"
    return default


def _check_range(name: str, value: float | None, low: float, high: float | None = None,
                 low_inclusive: bool = False) -> None:
    if value is None:
        return
    too_low = value < low if low_inclusive else value <= low
    if too_low or (high is not None and value > high):
        bound = f"in ({low}, {high}]" if high is not None else (f">= {low}" if low_inclusive else f"> {low}")
        raise UsageError(f"--{name.replace('_', '-')} must be {bound} (got {value})")


def resolve_inputs(raw: RawOptions) -> PlanInputs:
    facts = read_diagnose(raw.from_diagnose) if raw.from_diagnose is not None else DiagnoseFacts()
    server = facts.server
    sources: dict[str, str] = {}
    notes = list(facts.notes)

    if raw.model is not None:
        model = resolve_model(raw.model)
        sources["model"] = "flag"
    else:
        model = model_for_served_name(server.get("model"))
        if model is None:
            served = server.get("model")
            hint = f"the diagnose report serves {served!r}, which is not a preset; " if served else ""
            raise UsageError(f"no model: {hint}pass --model PRESET|DIR|config.json "
                             f"(presets: {', '.join(preset_names())})")
        sources["model"] = "diagnose"

    gpu = _resolve_gpu(raw, facts, sources)

    dtype = _pick("dtype", raw.dtype, dtype_from_server(server), "bf16", sources)
    dtype = str(dtype).lower()
    if dtype not in WEIGHT_DTYPES:
        raise UsageError(f"unknown --dtype {dtype!r}; choose one of {', '.join(WEIGHT_DTYPES)}")
    kv = str(_pick("kv_cache_dtype", raw.kv_cache_dtype, server.get("kv_cache_dtype") or None, "auto",
                   sources)).lower()
    if kv not in KV_CACHE_DTYPES:
        raise UsageError(f"unknown --kv-cache-dtype {kv!r}; choose one of {', '.join(KV_CACHE_DTYPES)}")
    kv_storage = KV_CACHE_DTYPES[kv] or ("fp16" if dtype == "fp16" else "bf16")

    tp = _pick("tp", raw.tp, _server_number(server, "tensor_parallel_size", int, notes), None, sources)
    if tp is not None:
        tp = int(tp)
        _check_range("tp", tp, 1, None, low_inclusive=True)
        if model.num_attention_heads % tp:
            raise UsageError(f"--tp {tp} does not divide the model's {model.num_attention_heads} attention "
                             "heads; vLLM needs it to. Try a power of two that divides them.")
    max_model_len = _pick("max_model_len", raw.max_model_len,
                          _server_number(server, "max_model_len", int, notes), None, sources)
    util = float(_pick("gpu_memory_utilization", raw.gpu_memory_utilization,
                       _server_number(server, "gpu_memory_utilization", float, notes),
                       A.DEFAULT_GPU_MEMORY_UTILIZATION, sources))
    # vLLM's own default for `vllm serve` on this GPU at the planned release (claims vllm.max-num-seqs-1024,
    # vllm.max-num-seqs-256): 1024 on GPUs of >= 70 GiB other than the A100 and GB10, 256 elsewhere. Planning
    # below it would cap the batch.
    default_seqs, _ = vllm_engine.default_max_num_seqs(gpu.vram_bytes, gpu.name, A.PLAN_VLLM_VERSION)
    max_num_seqs = int(_pick("max_num_seqs", raw.max_num_seqs, _server_number(server, "max_num_seqs", int, notes),
                             default_seqs, sources))
    input_len = int(_pick("input_len", raw.input_len, None, A.DEFAULT_INPUT_LEN, sources))
    output_len = int(_pick("output_len", raw.output_len, None, A.DEFAULT_OUTPUT_LEN, sources))
    mbu = float(_pick("mbu", raw.mbu, None, A.DEFAULT_MBU, sources))
    mfu = float(_pick("mfu", raw.mfu, None, A.DEFAULT_MFU, sources))

    _check_range("gpu_memory_utilization", util, 0.0, 1.0)
    _check_range("mbu", mbu, 0.0, 1.0)
    _check_range("mfu", mfu, 0.0, 1.0)
    for name, value in (("max_model_len", max_model_len), ("max_num_seqs", max_num_seqs),
                        ("input_len", input_len), ("output_len", output_len),
                        ("concurrency", raw.concurrency)):
        _check_range(name, value, 1, None, low_inclusive=True)
    _check_range("qps", raw.qps, 0.0)
    _check_range("price_per_gpu_hour", raw.price_per_gpu_hour, 0.0)
    _check_range("api_price_per_mtok", raw.api_price_per_mtok, 0.0)

    return PlanInputs(
        model=model, gpu=gpu, dtype=dtype, kv_cache_dtype=kv, kv_storage_dtype=kv_storage, tp=tp,
        max_model_len=None if max_model_len is None else int(max_model_len),
        gpu_memory_utilization=util, max_num_seqs=max_num_seqs, input_len=input_len,
        output_len=output_len, qps=raw.qps, concurrency=raw.concurrency,
        price_per_gpu_hour=raw.price_per_gpu_hour, api_price_per_mtok=raw.api_price_per_mtok,
        mbu=mbu, mfu=mfu, num_gpus_available=facts.num_gpus, sources=sources, notes=tuple(notes),
    )
