"""What a rule is: one small declaration (code, name, severity, inputs, doc) plus a check function.

A check reads its inputs through `Context` (rules/context.py) and returns a `Hit` when the problem is
there, None when it looked and found the problem absent. When an input it needs was not measured,
the accessor raises `MissingInput`: the rule is then *skipped with that reason*, never passed.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from triage.core.report import Certainty, FindingKind, Fix, Severity

if TYPE_CHECKING:
    from triage.rules.context import Context

DOC_SECTIONS = ("what", "why", "example", "fix", "references")
DOC_TITLES = {
    "what": "What it checks",
    "why": "Why it slows inference",
    "example": "Example evidence",
    "fix": "Fix",
    "references": "References",
}

CODE_RE = re.compile(r"^[A-Z]+[0-9]{3}$")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# Input names a rule may declare: probe names from docs/SNAPSHOT.md, plus the bench report and the
# earlier report used as a baseline. "a|b" means either one is enough.
KNOWN_INPUTS = frozenset({
    "gpu", "kernel_log", "cpu", "server_process", "memory", "storage", "network", "engine_identity",
    "server_metrics", "server_config", "logs", "bench", "baseline",
    "host_memory", "pcie", "hbm", "matmul", "allreduce",        # `diagnose --active` (probes/active/)
    "prometheus_history",                                        # `diagnose --prometheus`
    "topology", "server_peers",                                  # the deployment's shape (docs/TOPOLOGIES.md)
})


class MissingInput(Exception):
    """Raised by Context accessors: the rule cannot decide, and is skipped with this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RuleDoc:
    what: str
    why: str
    example: str
    fix: str
    references: tuple[str, ...]

    def section(self, key: str) -> str:
        value = getattr(self, key)
        return "\n".join(f"- {r}" for r in value) if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class Hit:
    """What a check returns when the problem is there. The engine turns it into a Finding."""

    title: str
    message: str
    evidence: dict[str, Any]
    fix: Fix
    certainty: Certainty = Certainty.LIKELY
    severity: Severity | None = None        # None: the rule's default severity
    impact: float = 0.5                     # 0..1 estimated share of performance at stake (ranking only)
    kind: FindingKind = FindingKind.PROBLEM  # OPPORTUNITY: a better config with no symptom; capped at LOW


Check = Callable[["Context"], "Hit | None"]


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    severity: Severity
    inputs: tuple[str, ...]
    doc: RuleDoc
    check: Check = field(repr=False, compare=False)
    thresholds: tuple[str, ...] = ()        # keys in rules/thresholds.py this rule reads
    removed: bool = False                   # retired codes stay registered, never reused

    @property
    def summary(self) -> str:
        return self.doc.what.split(". ")[0].rstrip(".")

    def explain(self) -> str:
        """The rule's doc as text, in the shape `ruff rule` prints."""
        lines = [f"# {self.code} ({self.name})", "",
                 f"Default severity: {self.severity.value}. Inputs: "
                 f"{', '.join(i.replace('|', ' or ') for i in self.inputs)}."]
        if self.removed:
            lines += ["", "This rule is removed; its code is kept so that it is never reused."]
        for key in DOC_SECTIONS:
            lines += ["", f"## {DOC_TITLES[key]}", "", self.doc.section(key)]
        return "\n".join(lines) + "\n"
