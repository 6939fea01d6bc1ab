"""Sizes of each ablation. ``quick`` takes about 80 s on a 2-core CPU with the `small` preset (about half of it
the compile row's cold and warm compiles); ``full`` uses the issue's sizes (1K-token shared prefix, 4K+ long
context, more requests)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

ROW_KEYS = ("offload", "batching", "kv-layout", "attention", "weights", "kv-fp8", "prefix-cache",
            "chunked-prefill", "roofline", "fp4", "cold-start", "compile")


@dataclass(frozen=True, slots=True)
class BaselineOptions:
    """`triage baseline`'s command line, as given (each default written here once)."""
    quick: bool = False
    model: str = "small"
    device: str = "cpu"
    dtype: str = "auto"
    threads: int | None = None
    rows: str = "all"


@dataclass(frozen=True, slots=True)
class BaselineConfig:
    model: str = "small"
    device: str = "cpu"
    dtype: str = "auto"                # auto: the fastest the weights allow, measured (dtype_choice.py)
    seed: int = 0
    num_threads: int | None = None     # CPU: torch intra-op threads; None: fit_num_threads() (threads.py)
    rows: tuple[str, ...] = ROW_KEYS
    # microbench
    bandwidth_buffer_bytes: int | None = None
    matmul_n: int | None = None
    # static -> continuous batching
    batching_num_requests: int = 16
    batching_max_num_seqs: int = 4
    batching_prompt_tokens: int = 16
    batching_min_tokens: int = 4
    batching_max_tokens: int = 48
    batching_length_exponent: float = 3.0   # output lengths ramp min→max as (i/(n-1))**exponent: long-tailed
    # contiguous -> paged
    kv_max_model_len: int = 1024
    kv_budget_tokens: int = 4096
    kv_num_requests: int = 64
    kv_prompt_tokens: int = 48
    kv_output_tokens: int = 8
    kv_max_num_seqs: int = 64
    # naive -> flash attention
    attention_context_tokens: int = 4096
    attention_backends: tuple[str, ...] = ("naive", "tiled", "sdpa")
    attention_num_layers: int | None = None   # run the prompt through the first N layers only (None: all)
    attention_repeats: int = 1                # runs per backend, alternating; the best counts
    # bf16 -> fp8 -> int4
    quant_group_size: int = 128
    quant_decode_tokens: int = 16
    quant_fp8_decode_tokens: int = 8
    quant_rounds: int = 3                     # each quantized model timed this many times, alternating with the base
    quality_num_prompts: int = 8
    quality_prompt_tokens: int = 64
    # prefix caching
    prefix_tokens: int = 1024
    prefix_suffix_tokens: int = 16
    prefix_num_requests: int = 4
    # chunked prefill
    chunk_num_decoding: int = 4
    chunk_decode_tokens: int = 32
    chunk_long_prompt_tokens: int = 2048
    chunk_num_long: int = 2
    chunk_budget_tokens: int = 256
    # roofline
    roofline_batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    roofline_prompt_tokens: int = 64
    roofline_decode_steps: int = 16
    roofline_dtypes: tuple[str, ...] = ("auto", "bfloat16", "float32")   # "auto": the chosen dtype; repeats dropped
    # eager -> compiled decode step (compile_row.py): the batches timed (each a compiled bucket) and the steps each
    compile_batch_sizes: tuple[int, ...] = (1, 8)
    compile_decode_steps: int = 16

    def replace(self, **changes) -> BaselineConfig:
        return replace(self, **changes)

    @classmethod
    def quick(cls, **overrides) -> BaselineConfig:
        return cls(**{**_QUICK, **overrides})

    @classmethod
    def full(cls, **overrides) -> BaselineConfig:
        return cls(**overrides)


_QUICK = dict(
    bandwidth_buffer_bytes=512 << 20, matmul_n=512,
    batching_num_requests=40, batching_max_num_seqs=8, batching_prompt_tokens=4, batching_min_tokens=1,
    batching_max_tokens=16, batching_length_exponent=5.0,
    kv_max_model_len=512, kv_budget_tokens=1024, kv_num_requests=16, kv_prompt_tokens=16, kv_output_tokens=2,
    kv_max_num_seqs=64,
    attention_context_tokens=4096, attention_backends=("naive", "sdpa"), attention_num_layers=1, attention_repeats=2,
    quant_decode_tokens=4, quant_fp8_decode_tokens=4, quality_num_prompts=1, quality_prompt_tokens=32,
    prefix_tokens=192, prefix_num_requests=3,
    chunk_num_decoding=3, chunk_decode_tokens=10, chunk_long_prompt_tokens=256, chunk_num_long=1,
    chunk_budget_tokens=128,
    roofline_batch_sizes=(1,), roofline_prompt_tokens=32, roofline_decode_steps=8, roofline_dtypes=("auto",),
    compile_decode_steps=8,
)


def config_dict(cfg: BaselineConfig) -> dict:
    """The config as JSON-ready values (tuples as lists)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()}
