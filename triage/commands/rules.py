"""`triage rules list|explain`: the rule registry and each rule's doc (as `ruff rule` prints one)."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table

from triage.cli_help import TriageCommand, TriageGroup, manual
from triage.cli_support import OptionSpec, console, funnel, option_groups
from triage.core.errors import UsageError

app = typer.Typer(no_args_is_help=True, add_completion=False, cls=TriageGroup)   # its help: triage/cli.py


@dataclass(frozen=True)
class RulesListOptions:
    """`triage rules list`'s command line, as given (each default written here once)."""
    format: str = "text"
    json: bool = False
    config: Path | None = None
    disable: tuple[str, ...] = ()


@dataclass(frozen=True)
class RulesExplainOptions:
    """`triage rules explain`'s command line, as given (each default written here once)."""
    code: str
    config: Path | None = None


CONFIG_SPEC = (Path, typer.Option(None, "--config", envvar="TRIAGE_CONFIG", exists=False, dir_okay=False,
                                  help="triage.toml with [rules] disable=[...] and [thresholds] overrides."))
RULES_LIST_OPTIONS: OptionSpec = {
    "format": (str, typer.Option(None, "--format", help="Output: text or json (as `triage engines list` takes it).")),
    "json": (bool, typer.Option(None, "--json", help="The same as --format json.")),
    "config": CONFIG_SPEC,
    "disable": (list[str], typer.Option(None, "--disable", metavar="CODE",
                                        help="Turn rules off: repeatable, or comma-separated (GPU007,CPU002).")),
}
RULES_EXPLAIN_OPTIONS: OptionSpec = {
    "code": (str, typer.Argument(..., help="A rule code (KV001) or name (kv-cache-saturated).")),
    "config": CONFIG_SPEC,
}


def _config(config: Path | None, disable: tuple[str, ...]):
    from triage.rules import REGISTRY, load_rules_config

    # Repeatable, and comma-separated as `triage diagnose --disable` takes it.
    codes = [c for item in disable for c in item.split(",")]
    cfg = load_rules_config(config).with_disabled(codes)
    cfg.validate(REGISTRY.codes())
    return cfg


@app.command("list", cls=TriageCommand, help=manual(
    "List every rule: code, name, default severity, inputs, and whether it is enabled.",
    "triage rules list", "triage rules list --disable GPU007,CPU002", "triage rules list --format json > rules.json"))
@funnel
@option_groups(opts=(RulesListOptions, RULES_LIST_OPTIONS))
def list_rules(opts: RulesListOptions) -> int:
    """List every rule: code, name, default severity, inputs, and whether it is enabled."""
    from triage.rules import REGISTRY, THRESHOLDS

    if opts.format not in ("text", "json"):
        raise UsageError(f"--format {opts.format!r}: choose text or json")
    cfg = _config(opts.config, opts.disable)
    if opts.json or opts.format == "json":
        rows = [{"code": r.code, "name": r.name, "severity": r.severity.value, "inputs": list(r.inputs),
                 "enabled": cfg.is_enabled(r.code), "summary": r.summary, "references": list(r.doc.references),
                 "thresholds": {k: {"value": cfg.threshold(k), "default": THRESHOLDS[k].value,
                                    "unit": THRESHOLDS[k].unit, "source": THRESHOLDS[k].source}
                                for k in r.thresholds}}
                for r in REGISTRY]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    out = console()
    wide = out.width >= 120
    table = Table(title=f"{len(REGISTRY)} rules (`triage rules explain CODE` for one)", title_justify="left")
    for col in ("code", "name", "severity", "on", "inputs") + (("what it checks",) if wide else ()):
        table.add_column(col, no_wrap=col in ("code", "severity", "on"), overflow="fold",
                         min_width=17 if col == "inputs" else None)
    for r in REGISTRY:
        row = [r.code, r.name, r.severity.value, "yes" if cfg.is_enabled(r.code) else "no",
               ", ".join(i.replace("|", " or ") for i in r.inputs)]
        table.add_row(*row, *((r.summary,) if wide else ()))
    out.print(table)
    return 0


@app.command("explain", cls=TriageCommand, help=manual(
    "Print one rule's doc: what it checks, why it slows inference, example evidence, fix, references.",
    "triage rules explain KV001", "triage rules explain kv-cache-saturated"))
@funnel
@option_groups(opts=(RulesExplainOptions, RULES_EXPLAIN_OPTIONS))
def explain(opts: RulesExplainOptions) -> int:
    """Print one rule's doc: what it checks, why it slows inference, example evidence, fix, references."""
    from triage.rules import REGISTRY, THRESHOLDS

    code, config = opts.code, opts.config

    rule = REGISTRY.get(code) or next((r for r in REGISTRY if r.name == code.strip().lower()), None)
    if rule is None:
        close = REGISTRY.close_matches(code)
        hint = ("; close matches: " + ", ".join(f"{c} ({REGISTRY.get(c).name})" for c in close)) if close else ""
        raise UsageError(f"unknown rule code {code!r}{hint}. `triage rules list` shows every rule.")
    cfg = _config(config, ())
    out = console()
    out.print(rule.explain(), markup=False, highlight=False, end="", soft_wrap=True)
    if rule.thresholds:
        out.print("\n## Thresholds\n", markup=False)
        for key in rule.thresholds:
            t = THRESHOLDS[key]
            value = cfg.threshold(key)
            note = "" if value == t.value else f" (default {t.value:g}, set in {config})"
            out.print(f"- {key} = {value:g} {t.unit}{note}: {t.meaning}. Source: {t.source}.", markup=False,
                      soft_wrap=True)
    from triage.rules.engine_flags import PRETTY, checked_versions
    out.print("\n## Fix flags checked against (tests/test_engine_conformance.py)\n", markup=False)
    for engine, versions in checked_versions().items():
        out.print(f"- {PRETTY[engine]}: {', '.join(versions)} (unknown version: the newest, named in the fix)",
                  markup=False, soft_wrap=True)
    claims = [r.split(":", 1)[1] for r in rule.doc.references if r.startswith("claim:")]
    if claims:
        from triage.engines import cite

        out.print("\n## What the engines' source says (triage/engines/ledger)\n", markup=False)
        for line in cite(claims):
            out.print(f"- {line}", markup=False, soft_wrap=True)
    if not cfg.is_enabled(rule.code):
        out.print(f"\nThis rule is disabled by {config}.", markup=False)
    return 0
