"""Shared probe types: the status of one probe, its result, and the snapshot they make together.

A probe never raises to its caller: whatever goes wrong becomes a status plus a reason in words.
A value that was not measured is None, never 0. See docs/SNAPSHOT.md for each probe's data keys.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class ProbeStatus(str, enum.Enum):
    OK = "ok"
    UNSUPPORTED = "unsupported"
    PERMISSION_DENIED = "permission_denied"
    TIMEOUT = "timeout"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    name: str
    status: ProbeStatus
    duration_s: float
    reason: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is ProbeStatus.OK


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the probes saw in one run: the input of the rules engine."""

    probes: tuple[ProbeResult, ...] = ()
    window_s: float | None = None

    def get(self, name: str) -> ProbeResult | None:
        for result in self.probes:
            if result.name == name:
                return result
        return None

    def data(self, name: str) -> dict[str, Any] | None:
        """The probe's data when it ran ok (partial data included), else None."""
        result = self.get(name)
        if result is None or result.status is not ProbeStatus.OK:
            return None
        return result.data
