"""Per-request sampling parameters. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass

from triage.core.errors import EngineError


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """``temperature == 0`` is greedy. ``seed`` makes one request's sampling reproducible on its own.

    ``min_tokens`` suppresses EOS and stop strings until that many tokens exist; ``ignore_eos`` keeps
    generating through EOS up to ``max_tokens``.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0

    def validate(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise EngineError(f"max_tokens must be a positive integer, got {self.max_tokens!r}")
        if self.temperature < 0:
            raise EngineError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise EngineError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.min_tokens < 0 or self.min_tokens > self.max_tokens:
            raise EngineError(f"min_tokens must be in [0, max_tokens={self.max_tokens}], got {self.min_tokens}")
        if isinstance(self.stop, str) or any(not isinstance(s, str) or not s for s in self.stop):
            raise EngineError("stop must be a tuple of non-empty strings")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
