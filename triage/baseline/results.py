"""What `triage baseline` measured: one AblationRow per before/after pair, mirroring the before/after table of "Why Your LLM Inference Is Slow (And How to Fix It)"."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class RowStatus(str, enum.Enum):
    MEASURED = "measured"
    SKIPPED = "skipped"
    ERROR = "error"


class Better(str, enum.Enum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True, slots=True)
class AblationRow:
    """One change, measured on this host. ``gain`` is how many times better "after" is than "before"
    (after/before when higher is better, before/after when lower is), None when not measured."""

    key: str                       # stable id: "batching", "kv-layout", "attention", ...
    change: str                    # "static → continuous batching"
    seed_claim: str | None         # the seed's published gain, e.g. "~2× throughput"
    metric: str                    # "output tokens/s"
    unit: str
    better: Better
    status: RowStatus
    before_label: str = ""
    after_label: str = ""
    before: float | None = None
    after: float | None = None
    reason: str | None = None      # why skipped / what failed
    details: dict[str, Any] = field(default_factory=dict)
    decode_step: str = "eager"     # how the engine's decode step ran: eager, or "eager → compiled" (the compile row)

    @property
    def gain(self) -> float | None:
        if self.before is None or self.after is None or self.before <= 0 or self.after <= 0:
            return None
        return self.after / self.before if self.better is Better.HIGHER else self.before / self.after


def measured(key: str, change: str, seed_claim: str | None, metric: str, unit: str, better: Better,
             before_label: str, before: float | None, after_label: str, after: float | None,
             decode_step: str = "eager", **details: Any) -> AblationRow:
    return AblationRow(key, change, seed_claim, metric, unit, better, RowStatus.MEASURED, before_label,
                       after_label, before, after, None, details, decode_step)


def skipped(key: str, change: str, seed_claim: str | None, metric: str, reason: str) -> AblationRow:
    return AblationRow(key, change, seed_claim, metric, "", Better.HIGHER, RowStatus.SKIPPED, reason=reason)


def failed(key: str, change: str, seed_claim: str | None, metric: str, reason: str) -> AblationRow:
    return AblationRow(key, change, seed_claim, metric, "", Better.HIGHER, RowStatus.ERROR, reason=reason)


def row_dict(row: AblationRow) -> dict[str, Any]:
    return {
        "key": row.key, "change": row.change, "seed_claim": row.seed_claim, "metric": row.metric,
        "unit": row.unit, "better": row.better.value, "status": row.status.value,
        "before_label": row.before_label, "after_label": row.after_label,
        "before": row.before, "after": row.after, "gain": row.gain, "reason": row.reason,
        "details": row.details, "decode_step": row.decode_step,
    }
