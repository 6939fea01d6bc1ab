"""One request's state as the scheduler and block manager see it. Torch-free."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from triage.reference_engine.layers.sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(slots=True)
class RequestTimes:
    """``time.monotonic()`` values; None until the moment is reached."""

    arrival_s: float | None = None
    scheduled_s: float | None = None
    first_token_s: float | None = None
    finished_s: float | None = None
    num_preemptions: int = 0


class Sequence:
    """Token ids (prompt then output), how many of them have KV in the cache, and the block table."""

    __slots__ = ("request_id", "token_ids", "num_prompt_tokens", "num_computed_tokens", "block_table",
                 "status", "params", "times", "finish_reason", "num_cached_tokens", "detok")

    def __init__(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams, arrival_s: float):
        self.request_id = request_id
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.num_computed_tokens = 0
        self.block_table: list[int] = []
        self.status = SequenceStatus.WAITING
        self.params = params
        self.times = RequestTimes(arrival_s=arrival_s)
        self.finish_reason: str | None = None
        self.num_cached_tokens = 0          # prompt tokens served from the prefix cache (first schedule)
        self.detok = None                   # the engine's IncrementalDetokenizer

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def __repr__(self) -> str:
        return (f"Sequence({self.request_id!r}, tokens={self.num_tokens}, computed={self.num_computed_tokens}, "
                f"blocks={self.block_table}, {self.status.value})")
