"""Engine knowledge: each tuning knob's flag per engine, and what each version turns on by default.

Facts (checked against the engines' docs and release notes):
- vLLM 0.8.0 made the V1 engine the default (PR #13726). V1 always schedules with chunked prefill and
  enables automatic prefix caching by default; `--no-enable-prefix-caching` turns it off.
  `VLLM_USE_V1=0` kept V0 (where both are off by default) until V0 was removed.
- vLLM 0.17 brought FlashAttention 3/4 as the automatic backend on Hopper/Blackwell (seed 000 §5).
- SGLang: RadixAttention prefix caching is on unless `--disable-radix-cache`; chunked prefill is on
  (`--chunked-prefill-size`, -1 disables it); CUDA graphs are on unless `--disable-cuda-graph`.
- TGI 3.0 turned on prefix caching and chunked prefill by default (flash/paged backends).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

NON_BATCHING_ENGINES = frozenset({"ollama", "llama.cpp", "hf-generate"})

LAUNCHERS = {
    "vllm": "vllm serve",
    "sglang": "python -m sglang.launch_server",
    "tgi": "text-generation-launcher",
}

# knob -> engine -> flag template. "{v}" is the value computed from the evidence. A missing engine
# means it has no equivalent knob.
FLAGS: dict[str, dict[str, str]] = {
    "gpu_memory_utilization": {"vllm": "--gpu-memory-utilization {v}", "sglang": "--mem-fraction-static {v}",
                               "tgi": "--cuda-memory-fraction {v}"},
    "max_model_len": {"vllm": "--max-model-len {v}", "sglang": "--context-length {v}", "tgi": "--max-total-tokens {v}"},
    "max_num_seqs": {"vllm": "--max-num-seqs {v}", "sglang": "--max-running-requests {v}",
                     "tgi": "--max-concurrent-requests {v}"},
    "max_num_batched_tokens": {"vllm": "--max-num-batched-tokens {v}", "sglang": "--chunked-prefill-size {v}",
                               "tgi": "--max-batch-prefill-tokens {v}"},
    "max_batch_total_tokens": {"tgi": "--max-batch-total-tokens {v}"},
    "kv_cache_dtype_fp8": {"vllm": "--kv-cache-dtype fp8", "sglang": "--kv-cache-dtype fp8_e4m3",
                           "tgi": "--kv-cache-dtype fp8_e4m3fn"},
    "quantization_fp8": {"vllm": "--quantization fp8", "sglang": "--quantization fp8", "tgi": "--quantize fp8"},
    "quantization_int4": {"vllm": "--quantization awq", "sglang": "--quantization awq", "tgi": "--quantize awq"},
    "tensor_parallel_size": {"vllm": "--tensor-parallel-size {v}", "sglang": "--tp-size {v}", "tgi": "--num-shard {v}"},
    "enable_chunked_prefill": {"vllm": "--enable-chunked-prefill", "sglang": "--chunked-prefill-size 8192"},
    "enable_prefix_caching": {"vllm": "--enable-prefix-caching"},
    "api_server_count": {"vllm": "--api-server-count {v}"},
    "tokenizer_mode_auto": {"vllm": "--tokenizer-mode auto", "sglang": "--tokenizer-mode auto"},
}

# Flags that turn a default-on feature off: the fix is to remove them.
DISABLING_FLAGS: dict[str, dict[str, str]] = {
    "prefix_caching": {"vllm": "--no-enable-prefix-caching", "sglang": "--disable-radix-cache",
                       "tgi": "PREFIX_CACHING=0 (environment)"},
    "chunked_prefill": {"vllm": "--no-enable-chunked-prefill", "sglang": "--chunked-prefill-size -1",
                        "tgi": "--max-batch-prefill-tokens equal to --max-input-tokens"},
    "cuda_graphs": {"vllm": "--enforce-eager", "sglang": "--disable-cuda-graph", "tgi": "--cuda-graphs 0"},
}

_VERSION_RE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'0.8.5.post1' -> (0, 8, 5); 'v3.0.1' -> (3, 0, 1); None or garbage -> None."""
    if not text:
        return None
    m = _VERSION_RE.search(str(text))
    if not m:
        return None
    return tuple(int(g) if g is not None else 0 for g in m.groups())  # type: ignore[return-value]


def normalise_engine(name: str | None) -> str | None:
    if not name:
        return None
    n = str(name).strip().lower()
    if n.startswith("vllm"):
        return "vllm"
    if n in ("text-generation-inference", "tgi"):
        return "tgi"
    if n in ("llamacpp", "llama-cpp", "llama.cpp", "llama-server"):
        return "llama.cpp"
    return n


@dataclass(frozen=True, slots=True)
class EngineInfo:
    name: str | None            # vllm | sglang | tgi | reference | ollama | llama.cpp | hf-generate | None
    version: str | None
    v0: bool = False            # vLLM running the V0 engine (metrics say so, or version < 0.8)
    v1_metrics: bool = False    # vLLM exporting V1 metric names (kv_cache_usage_perc): the V1 engine, >= 0.8

    @property
    def version_tuple(self) -> tuple[int, int, int] | None:
        return parse_version(self.version)

    @property
    def label(self) -> str:
        if self.name is None:
            return "unknown engine"
        text = f"{self.name} {self.version}" if self.version else self.name
        return f"{text} (V0 engine)" if self.v0 else text

    def default_on(self, feature: str) -> bool | None:
        """Is `feature` ('chunked_prefill' | 'prefix_caching') on by default here? None: unknown."""
        v = self.version_tuple
        if self.name == "vllm":
            if self.v0:
                return False
            if v is None:
                return True if self.v1_metrics else None
            return v >= (0, 8, 0)
        if self.name == "sglang":
            return True
        if self.name == "tgi":
            return None if v is None else v >= (3, 0, 0)
        if self.name == "reference":
            return True
        return None


def flag(knob: str, engine: str | None, value: object = None) -> str | None:
    """The flag for `knob` on `engine`, with the value filled in; None when there is no equivalent."""
    template = FLAGS.get(knob, {}).get(engine or "")
    if template is None:
        return None
    return template.format(v=value)


def engine_flags(knobs: dict[str, object], engine: str | None) -> tuple[tuple[str, ...], str]:
    """Commands plus a sentence with the other engines' equivalents.

    A known engine gets its flags as the commands. An unknown one gets a vLLM, SGLang and TGI line each.
    """
    known = engine if engine in LAUNCHERS else None
    if known is not None:
        cmds = tuple(f for f in (flag(k, known, v) for k, v in knobs.items()) if f)
        others = []
        for other in LAUNCHERS:
            if other == known:
                continue
            flags = [f for f in (flag(k, other, v) for k, v in knobs.items()) if f]
            if flags:
                others.append(f"{_pretty(other)}: {' '.join(flags)}")
        note = f" Equivalents: {'; '.join(others)}." if others else ""
        return cmds, note
    cmds_list = []
    for eng, launcher in LAUNCHERS.items():
        flags = [f for f in (flag(k, eng, v) for k, v in knobs.items()) if f]
        if flags:
            cmds_list.append(f"{launcher} ... {' '.join(flags)}")
    return tuple(cmds_list), ""


def _pretty(engine: str) -> str:
    return {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI"}.get(engine, engine)
