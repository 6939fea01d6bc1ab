"""What every probe payload is: a frozen, slotted, keyword-only dataclass whose fields default to None
(a value that was not measured is None, never 0). `build` makes one from a probe's dict strictly: a key
the type does not declare is an error, so a probe cannot drift from the contract without a test failing."""
from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from triage.core.convert import from_dict, to_dict

P = TypeVar("P", bound="Payload")

payload = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
"""The decorator for a payload type and for the records inside one."""


class Payload:
    """Mixin of the top-level payload of one probe (`PROBE` names the probe)."""

    __slots__ = ()
    PROBE: str = ""

    @classmethod
    def build(cls: type[P], data: dict[str, Any]) -> P:
        """Strict: every key must be a declared field (nested records included)."""
        return from_dict(cls, data, f"probe {cls.PROBE}", strict=True)

    @classmethod
    def read(cls: type[P], data: dict[str, Any], where: str) -> P:
        """Lenient, for reports: unknown keys (from a newer 1.x) are dropped, absent ones are None."""
        return from_dict(cls, data, where)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def of(cls: type[P], data: dict[str, Any] | None) -> P | None:
        """`build`, with None for a probe that measured nothing (no data, or an empty dict)."""
        return cls.build(data) if data else None
