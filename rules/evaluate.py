"""evaluate(): run the enabled rules over a snapshot (and a bench report), rank the findings, and link
causal chains. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, replace

from triage.core.report import BenchSection, Finding, FindingKind, Report, Severity, SkippedRule
from triage.core.snapshot import Snapshot
from triage.rules.base import Hit, MissingInput, Rule
from triage.rules.context import Context
from triage.rules.fix_commands import complete
from triage.rules.registry import REGISTRY
from triage.rules.rules_config import RulesConfig

# cause -> the findings it explains when both fire. Read as "KV001 explains SCHED003".
CAUSES: dict[str, tuple[str, ...]] = {
    "TOPO001": ("KV001", "KV002", "SCHED003", "BENCH003", "FLEET001"),
    "TOPO002": ("BENCH003", "ENG002"),
    "TOPO003": ("BENCH003",),
    "TOPO004": ("KV001", "KV002", "SCHED003", "BENCH003"),
    "KV008": ("KV001", "KV002", "KV006", "SCHED003", "BENCH003"),
    "KV001": ("SCHED003", "BENCH003", "KV002"),
    "KV002": ("SCHED003", "BENCH003", "ENG006", "SCHED001"),
    "KV003": ("KV001", "KV002"),
    "KV004": ("KV001", "KV002"),
    "KV006": ("KV001", "KV002"),
    "GPU009": ("KV001", "KV002", "KV006"),
    "SCHED002": ("SCHED003", "BENCH003"),
    "SCHED003": ("BENCH003",),
    "SCHED001": ("BENCH003",),
    "SCHED005": ("ENG002", "BENCH003"),
    "SCHED006": ("BENCH003",),
    "GPU001": ("ENG002", "BENCH003", "GPU008"),
    "GPU002": ("ENG002", "BENCH003"),
    "GPU003": ("ENG002", "BENCH003", "GPU002"),
    "GPU004": ("ENG002", "BENCH003"),
    "GPU010": ("ENG002", "BENCH003", "ENG007"),
    "GPU012": ("GPU002",),
    "GPU013": ("GPU006", "ENG007", "BENCH002"),
    "ENG007": ("BENCH003", "BENCH002"),
    "ENG001": ("SCHED004", "GPU008", "SCHED003", "BENCH003"),
    "ENG005": ("SCHED006", "ENG002"),
    "CPU001": ("CPU003", "ENG002"),
    "CPU003": ("GPU008", "SCHED004", "BENCH003"),
    "CPU004": ("CPU003", "GPU008"),
    "MEM001": ("BENCH003",),
    "NET003": ("BENCH003",),
    "QUANT002": ("KV001", "KV002", "GPU001"),
    "BENCH001": ("SCHED004",),
}


@dataclass(frozen=True, slots=True)
class Evaluation:
    findings: tuple[Finding, ...]
    skipped: tuple[SkippedRule, ...]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]


def bench_rule_codes() -> frozenset[str]:
    """Rules that a bench report alone can satisfy (every input group allows `bench`): what `triage bench`
    runs, as `RulesConfig(enabled_only=bench_rule_codes())`, so that it does not list every probe rule as
    skipped."""
    return frozenset(r.code for r in REGISTRY if not r.removed and all("bench" in g.split("|") for g in r.inputs))


def _input_missing(group: str, ctx: Context) -> str | None:
    """None when at least one alternative of `a|b` is there, else why none is."""
    reasons = []
    for name in group.split("|"):
        if name == "bench":
            if ctx.bench is not None and ctx.bench.levels:
                return None
            reasons.append("no bench report")
        elif name == "baseline":
            if ctx.baseline is not None:
                return None
            reasons.append("no earlier report to compare with (--baseline)")
        else:
            if ctx.has(name):
                return None
            result = ctx.snapshot.get(name)
            if result is None:
                reasons.append(f"probe {name} did not run")
            else:
                reasons.append(f"probe {name} is {result.status.value}" + (f": {result.reason}" if result.reason else ""))
    return "; ".join(reasons)


def _run(r: Rule, ctx: Context) -> Hit | SkippedRule | None:
    for group in r.inputs:
        reason = _input_missing(group, ctx)
        if reason is not None:
            return SkippedRule(r.code, f"needs {group.replace('|', ' or ')}: {reason}")
    try:
        return r.check(ctx)
    except MissingInput as e:
        return SkippedRule(r.code, e.reason)
    except Exception as e:  # noqa: BLE001 - any failure of one rule is that rule's, never the report's
        # Malformed or absurd input (an infinite peak, a wrongly typed field) must not take down the whole
        # diagnosis: the rule is reported as errored, with the reason, and every other rule still runs.
        return SkippedRule(r.code, f"errored: internal error while checking ({type(e).__name__}: "
                                   f"{str(e)[:200]}); please report it")


def evaluate(snapshot: Snapshot, bench: BenchSection | None = None, baseline: Report | None = None,
             config: RulesConfig | None = None) -> Evaluation:
    """Run every enabled rule. Findings come sorted by severity, certainty, then estimated impact."""
    config = config or RulesConfig()
    config.validate(REGISTRY.codes())
    ctx = Context(snapshot=snapshot, bench=bench, baseline=baseline, config=config)
    hits: list[tuple[Rule, Hit]] = []
    skipped: list[SkippedRule] = []
    for r in REGISTRY:
        if r.removed or not config.is_enabled(r.code):
            continue
        outcome = _run(r, ctx)
        if isinstance(outcome, SkippedRule):
            skipped.append(outcome)
        elif outcome is not None:
            hits.append((r, outcome))
    fired = {r.code for r, _ in hits}
    ranked = sorted(hits, key=lambda rh: (severity_of(*rh).rank, rh[1].certainty.rank,
                                          -rh[1].impact, rh[0].code))
    launch = ctx.launch_argv()
    findings = tuple(_finding(r, replace(h, fix=complete(h.fix, launch) if h.fix else h.fix), fired)
                     for r, h in ranked)
    return Evaluation(findings=findings, skipped=tuple(skipped))


def severity_of(r: Rule, h: Hit) -> Severity:
    """The severity policy: an opportunity (no symptom on this deployment) is never above LOW."""
    severity = h.severity or r.severity
    if h.kind is FindingKind.OPPORTUNITY and severity.rank < Severity.LOW.rank:
        return Severity.LOW
    return severity


def _finding(r: Rule, h: Hit, fired: set[str]) -> Finding:
    explains = tuple(c for c in CAUSES.get(r.code, ()) if c in fired and c != r.code)
    f = Finding(code=r.code, name=r.name, severity=severity_of(r, h), certainty=h.certainty,
                title=h.title, message=h.message, evidence=dict(h.evidence), fix=h.fix,
                references=r.doc.references, explains=explains, kind=h.kind)
    if explains:
        f = replace(f, message=f"{h.message} This likely explains {', '.join(explains)}.")
    return f
