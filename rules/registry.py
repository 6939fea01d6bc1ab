"""The registry: every rule, by code. Declaring a rule is one `@rule(...)` above its check function."""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator

from triage.core.registry import Registry as BaseRegistry
from triage.core.registry import RegistryError
from triage.core.report import Severity
from triage.rules.base import CODE_RE, DOC_SECTIONS, KNOWN_INPUTS, NAME_RE, Check, Rule, RuleDoc
from triage.rules.thresholds import THRESHOLDS


def _shape_problems(r: Rule) -> list[str]:
    """The code, name, severity and inputs of one declaration."""
    problems = []
    if not CODE_RE.match(r.code):
        problems.append(f"code {r.code!r} is not like KV001")
    if not NAME_RE.match(r.name):
        problems.append(f"{r.code}: name {r.name!r} is not kebab-case")
    if not isinstance(r.severity, Severity):
        problems.append(f"{r.code}: severity must be a Severity")
    if not r.inputs:
        problems.append(f"{r.code}: declares no inputs")
    problems += [f"{r.code}: unknown input {name!r}" for group in r.inputs for name in group.split("|")
                 if name not in KNOWN_INPUTS]
    return problems


def declaration_problems(r: Rule) -> list[str]:
    """What is wrong with one declaration (empty when it is fine)."""
    problems = _shape_problems(r)
    for key in DOC_SECTIONS:
        value = getattr(r.doc, key, None)
        if not value or (isinstance(value, str) and not value.strip()):
            problems.append(f"{r.code}: doc section {key!r} is empty")
    for key in r.thresholds:
        if key not in THRESHOLDS:
            problems.append(f"{r.code}: threshold {key!r} is not in rules/thresholds.py")
    return problems


class Registry(BaseRegistry[Rule]):
    """Every rule, by code: each module of `packages` (rules/catalog/) declares its rule by being imported."""

    def __init__(self, packages: tuple[str, ...] = ()) -> None:
        super().__init__("rule", lambda r: r.code, packages)

    def add(self, r: Rule, *, same: Callable[[Rule, Rule], bool] | None = None) -> Rule:
        problems = declaration_problems(r)
        if r.code in self._items:
            problems.append(f"duplicate rule code {r.code} ({self._items[r.code].name} and {r.name})")
        if any(existing.name == r.name for existing in self._items.values()):
            problems.append(f"duplicate rule name {r.name}")
        if problems:
            raise RegistryError("; ".join(problems))
        return super().add(r)

    def __iter__(self) -> Iterator[Rule]:
        return iter(sorted(super().__iter__(), key=lambda r: r.code))

    def get(self, code: str) -> Rule | None:
        return super().get(code.upper())

    def codes(self) -> list[str]:
        return sorted(self.keys())

    def close_matches(self, text: str, n: int = 5) -> list[str]:
        """Codes and names near `text`, for 'unknown code' messages."""
        text = text.strip()
        by_code = difflib.get_close_matches(text.upper(), self.codes(), n=n, cutoff=0.5)
        names = {r.name: r.code for r in self}
        by_name = [names[m] for m in difflib.get_close_matches(text.lower(), list(names), n=n, cutoff=0.5)]
        prefix = [c for c in self.codes() if c.startswith(text.upper().rstrip("0123456789")) and text]
        out: list[str] = []
        for code in by_code + by_name + prefix:
            if code not in out:
                out.append(code)
        return out[:n]


REGISTRY = Registry(packages=("triage.rules.catalog",))


def rule(code: str, name: str, severity: Severity, inputs: tuple[str, ...], doc: RuleDoc,
         thresholds: tuple[str, ...] = ()) -> Callable[[Check], Check]:
    """Declare a rule: `@rule("KV001", "kv-cache-saturated", Severity.HIGH, ("server_metrics|bench",), DOC)`."""

    def register(check: Check) -> Check:
        REGISTRY.add(Rule(code=code, name=name, severity=severity, inputs=tuple(inputs), doc=doc,
                          check=check, thresholds=tuple(thresholds)))
        return check

    return register
