"""Shared probe types: the status of one probe, its result, and the snapshot they make together.

A probe never raises to its caller: whatever goes wrong becomes a status plus a reason in words.
A value that was not measured is None, never 0. Each probe's `data` is its own payload type
(triage/core/probe_data/, documented in docs/SNAPSHOT.md); a plain dict given for it (a report being
read, a test fixture) is typed on construction.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:   # imported when first needed: `triage --version` never builds a payload type
    from triage.core.probe_data import Payload

P = TypeVar("P", bound="Payload")


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
    data: Any = None          # the probe's Payload, None when it measured nothing

    def __post_init__(self) -> None:
        if self.data is not None:
            from triage.core.probe_data import Payload, read_payload

            if not isinstance(self.data, Payload):
                object.__setattr__(self, "data", read_payload(self.name, self.data, f"probe {self.name}"))

    def __json__(self) -> dict[str, Any]:
        """As the report writes it: the payload's fields (every one, null when not measured), {} for none."""
        return {"name": self.name, "status": self.status, "duration_s": self.duration_s, "reason": self.reason,
                "data": self.data if self.data is not None else {}}

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

    def data(self, name: str) -> Any:
        """The probe's payload when it ran ok (partial data included), else None."""
        result = self.get(name)
        if result is None or result.status is not ProbeStatus.OK:
            return None
        return result.data

    def payload(self, cls: type[P]) -> P | None:
        """The typed payload of the probe `cls.PROBE` when it ran ok, else None."""
        data = self.data(cls.PROBE)
        return data if isinstance(data, cls) else None
