"""What the engine hands back: per-step request outputs, completions, and stats. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass

from triage.reference_engine.engine.sequence import RequestTimes


@dataclass(slots=True)
class RequestOutput:
    request_id: str
    new_token_ids: list[int]
    text_delta: str
    finished: bool
    finish_reason: str | None            # "stop" | "length" | "abort" once finished
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_tokens: int
    times: RequestTimes


@dataclass(frozen=True, slots=True)
class Completion:
    request_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    text: str
    finish_reason: str | None
    times: RequestTimes


@dataclass(frozen=True, slots=True)
class StepStats:
    num_prefill_tokens: int
    num_decode_tokens: int
    num_tokens: int
    num_seqs: int
    num_preempted: int
    duration_s: float
    num_padding_tokens: int = 0          # static batching: rows decoded only as padding


@dataclass(frozen=True, slots=True)
class EngineStats:
    num_requests_running: int
    num_requests_waiting: int
    kv_cache_usage_frac: float
    num_kv_blocks_total: int
    num_kv_blocks_free: int
    block_size: int
    kv_cache_bytes: int
    kv_cache_tokens_capacity: int
    num_preemptions_total: int
    prefix_cache_queries_total: int      # prompt tokens looked up in the prefix cache
    prefix_cache_hits_total: int         # of those, tokens found
    prompt_tokens_total: int
    generation_tokens_total: int
    dtype: str                           # the compute dtype actually used
    attention_backend: str               # the backend actually chosen
    kv_layout: str = "paged"
    scheduler: str = "continuous"
    dtype_note: str = ""
    kv_cache_dtype: str = ""
    kv_tokens_reserved: int = 0          # token slots held by running sequences
    kv_tokens_used: int = 0              # of those, slots holding a token
    kv_reserved_bytes: int = 0
    kv_used_bytes: int = 0
    kv_fragmentation_frac: float = 0.0
    num_steps_total: int = 0
    decode_step: str = "eager"           # eager | compiled (engine/compiled_step.py)
