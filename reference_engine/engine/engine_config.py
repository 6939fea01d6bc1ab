"""Engine configuration: the serving knobs, named as vLLM names them (``max_num_seqs``,
``max_num_batched_tokens``, ...). Torch-free. The model's own shape is ``models/model_config.py``."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from triage.core.errors import EngineError

SCHEDULERS = ("continuous", "static")
KV_LAYOUTS = ("paged", "contiguous")
LOAD_FORMATS = ("auto", "dummy", "safetensors")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZATIONS = ("none", "fp8", "int4")
COMPILE_MODES = ("off", "auto", "on")      # the decode step: eager, compiled where it measures faster, compiled
KV_CACHE_DTYPES = ("auto", "float32", "bfloat16", "float16", "fp8", "fp8_e4m3")   # fp8: e4m3 + per-(token, head) scale


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Serving knobs, with vLLM's names. ``validate()`` raises EngineError on nonsense."""

    model: str = "tiny"
    dtype: str = "auto"
    device: str = "cpu"
    max_model_len: int | None = None
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    kv_cache_bytes: int | None = None
    num_kv_blocks: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = "auto"
    scheduler: str = "continuous"
    kv_layout: str = "paged"
    attention: str = "auto"
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    seed: int = 0
    load_format: str = "auto"
    num_threads: int | None = None      # CPU: torch intra-op threads (process-wide); None leaves torch's default
    # With fp32 compute on a CPU: keep bf16-valued Linear weights in bf16 (layers/kernels/bf16_weights.py). auto
    # measures; bf16 forces it where the weights are bf16 values; fp32 never.
    weight_storage: str = "auto"
    # Weight-only quantization at load (layers/quant/handlers.py): none, fp8 or int4 (group 128). On a CPU the
    # packed-weight kernels (layers/kernels/quant_weights.py) run it where they measure faster; the reason is in
    # the dtype note.
    quantization: str = "none"
    # The decode step compiled with torch.compile (engine/compiled_step.py): off (eager), auto (compiled where a
    # short probe measures it faster, else eager with the reason), on (compiled, or an error saying why not).
    # Off by default: compiling costs start-up seconds (a cold cache: about 10 s for the tiny preset, 20 s for
    # small, on a 2-core host), which tests and demos should not pay.
    compile: str = "off"
    compile_cache_dir: str | None = None      # Inductor's on-disk cache; None: TORCHINDUCTOR_CACHE_DIR or torch's

    def replace(self, **changes: Any) -> EngineConfig:
        return replace(self, **changes)

    def validate(self) -> None:
        # ``attention`` is checked against the backend registry by the engine (backends can be registered).
        choices = {"scheduler": SCHEDULERS, "kv_layout": KV_LAYOUTS, "load_format": LOAD_FORMATS, "dtype": DTYPES, "kv_cache_dtype": KV_CACHE_DTYPES,
                   "weight_storage": ("auto", "bf16", "fp32"), "quantization": QUANTIZATIONS,
                   "compile": COMPILE_MODES}
        for name, allowed in choices.items():
            value = getattr(self, name)
            if value not in allowed:
                raise EngineError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        positive = {"max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
                    "block_size": self.block_size}
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise EngineError(f"{name} must be a positive integer, got {value!r}")
        for name in ("max_model_len", "kv_cache_bytes", "num_kv_blocks", "num_threads"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise EngineError(f"{name} must be a positive integer or unset, got {value!r}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise EngineError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise EngineError(f"device={self.device!r}: use 'cpu' or 'cuda' / 'cuda:N'")
