"""`triage engines list|show`: what triage knows about each serving engine, the versions it tabled from each
engine's own source (with provenance), and the claims that back every sentence it says about an engine."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import typer
from rich.table import Table

from triage.cli_help import TriageCommand, TriageGroup, manual
from triage.cli_support import OptionSpec, console, funnel, option_groups
from triage.core.errors import UsageError

app = typer.Typer(no_args_is_help=True, add_completion=False, cls=TriageGroup)   # its help: triage/cli.py


@dataclass(frozen=True)
class EnginesListOptions:
    """`triage engines list`'s command line, as given (each default written here once)."""
    format: str = "text"


@dataclass(frozen=True)
class EnginesShowOptions:
    """`triage engines show`'s command line, as given (each default written here once)."""
    engine: str
    version: str | None = None
    format: str = "text"


FORMAT_SPEC = (str, typer.Option(None, "--format", help="Output: text or json."))
ENGINES_LIST_OPTIONS: OptionSpec = {"format": FORMAT_SPEC}
ENGINES_SHOW_OPTIONS: OptionSpec = {
    "engine": (str, typer.Argument(..., help="An engine name: vllm, sglang, tgi, llama.cpp, ollama, ...")),
    "version": (str, typer.Option(None, "--version", help="A server version: the knobs as that version has them "
                                                          "(default: the newest tabled).")),
    "format": FORMAT_SPEC,
}


def _provenance(engine: str, version: str) -> dict:
    import triage.engines.truth as truth

    prov = truth.table(engine, version).provenance
    return {"version": version, "source": prov.get("package") or f"{prov.get('repository')}@{prov.get('tag')}",
            "archive": prov.get("archive"), "sha256": prov.get("archive_sha256") or prov.get("commit"),
            "files": len(prov.get("files", {}))}


@app.command("list", cls=TriageCommand, help=manual(
    "Every engine triage recognises, and the versions whose flags, defaults and metrics are tabled.",
    "triage engines list",
    "triage engines list --format json"))
@funnel
@option_groups(opts=(EnginesListOptions, ENGINES_LIST_OPTIONS))
def list_engines(opts: EnginesListOptions) -> int:
    """Every engine triage recognises, and the versions whose flags, defaults and metrics are tabled."""
    import triage.engines.truth as truth
    from triage.engines import engines

    fmt = opts.format
    if fmt not in ("text", "json"):
        raise UsageError(f"--format {fmt!r}: choose text or json")
    rows = [{"name": e.name, "display": e.display, "launcher": e.launcher,
             "versions": [_provenance(e.name, v) for v in truth.versions(e.name)],
             "claims": list(e.cited())} for e in engines()]
    if fmt == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    table = Table(title="Engines (`triage engines show NAME` for one)", title_justify="left")
    for col in ("engine", "launcher", "tabled versions", "claims"):
        table.add_column(col, overflow="fold")
    for r in rows:
        versions = [v["version"] for v in r["versions"]]
        shown = (f"{len(versions)}: {versions[0]} ... {versions[-1]}" if len(versions) > 2 else ", ".join(versions)) \
            or "none (no flag table)"
        table.add_row(r["display"], r["launcher"] or "-", shown, str(len(r["claims"])))
    console().print(table)
    return 0


@app.command("show", cls=TriageCommand, help=manual(
    "One engine: its knobs at a version (flag, default, or why there is none), what it turns on by default, "
    "and the claims, each cited to the engine's source.",
    "triage engines show tgi --version 3.3.6",
    "triage engines show sglang --version 0.5.4 --format json"))
@funnel
@option_groups(opts=(EnginesShowOptions, ENGINES_SHOW_OPTIONS))
def show(opts: EnginesShowOptions) -> int:
    """One engine: its knobs at a version, its defaults and its claims."""
    import difflib

    from triage.engines import get, known_names, names

    engine, version, fmt = opts.engine, opts.version, opts.format

    # A name the user types must be one triage knows (a name or an alias), not a prefix of one: `vllm2` is a typo.
    module = get(engine) if engine.strip().lower() in known_names() else None
    if module is None:
        close = difflib.get_close_matches(engine.lower(), known_names(), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UsageError(f"unknown engine {engine!r}{hint}; triage knows {', '.join(names())}")
    if fmt not in ("text", "json"):
        raise UsageError(f"--format {fmt!r}: choose text or json")
    out = _engine_facts(module, version)
    if fmt == "json":
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    _print_facts(out)
    return 0


def _knob_facts(module: Any, knob: str, version: str | None, table: Any) -> dict[str, Any]:
    """One knob at `version`: the flag that sets it (or why none does), its default there, its claims."""
    from triage.engines import Knob
    from triage.rules.engine_flags import render

    spec = module.knob(knob, version)
    flag = spec.flag if isinstance(spec, Knob) else None
    spec_table = table.flag(flag) if table is not None and flag and not spec.is_env else None
    shown = flag if not isinstance(spec, Knob) or not spec.value or "{v}" in spec.value else f"{flag} {spec.value}"
    problem = None
    if isinstance(spec, Knob) and module.launcher and not spec.is_env:
        r = render(knob, module.name, 1, version)
        problem = r.note if r.text is None else None
    return {"flag": None if problem else shown,
            "default": spec_table.default if spec_table is not None else None,
            "note": problem or (spec.note if isinstance(spec, Knob) else spec.reason),
            "claims": list(spec.claims)}


def _engine_facts(module: Any, version: str | None) -> dict[str, Any]:
    """What `engines show` says of one engine at a version, as the JSON it prints."""
    import triage.engines.truth as truth
    from triage.engines import cite
    from triage.engines.startup import startup_markers

    table = truth.table(module.name, version)
    return {"name": module.name, "display": module.display, "version": version,
            "table": table.label if table is not None else None,
            "defaults_on": {f: module.default_on(f, version) for f in ("chunked_prefill", "prefix_caching")},
            "knobs": {knob: _knob_facts(module, knob, version, table) for knob in module.knobs},
            "facts": {k: {"sentence": t, "claims": list(c)} for k, (t, c) in module.notes.items()},
            "milestones": [{"version": m.version, "what": m.what} for m in module.milestones],
            "startup_markers": {f"{phase}.{edge}": list(forms)
                                for (phase, edge), forms in startup_markers(module, version).items()},
            "log_facts": {fact: [{"form": f.text, "claim": f.claim} for f in module.log_fact(fact, version)]
                          for fact in module.log_facts if module.log_fact(fact, version)},
            "claims": cite(module.cited())}


def _print_facts(out: dict[str, Any]) -> None:
    con = console()
    con.print(f"{out['display']}" + (f" (flags checked against {out['table']})" if out["table"] else
                                     " (no per-version flag table)"), markup=False)
    grid = Table(title="Knobs", title_justify="left")
    for col in ("knob", "flag", "default", "note"):
        grid.add_column(col, overflow="fold")
    for knob, k in out["knobs"].items():
        grid.add_row(knob, k["flag"] or "-", "" if k["default"] is None else str(k["default"]), k["note"] or "")
    con.print(grid)
    on = ", ".join(f"{f}: {'on' if v else 'off' if v is False else 'unknown'}" for f, v in out["defaults_on"].items())
    con.print(f"Defaults: {on}", markup=False)
    for m in out["milestones"]:
        con.print(f"From {m['version']}: {m['what']}", markup=False)
    if out["startup_markers"]:
        con.print("Start-up log lines (triage coldstart, diagnose --log):", markup=False)
        for key, forms in out["startup_markers"].items():
            con.print(f"  {key}: " + " | ".join(repr(f) for f in forms), markup=False, soft_wrap=True)
    if out["log_facts"]:
        con.print("What its log states (diagnose --from, docs/LOGS.md):", markup=False)
        for fact, forms in out["log_facts"].items():
            texts = dict.fromkeys(f["form"] for f in forms)
            con.print(f"  {fact}: " + " | ".join(repr(t) for t in texts), markup=False, soft_wrap=True)
    con.print("\nClaims (sentence [id: source lines]):", markup=False)
    for line in out["claims"]:
        con.print(f"- {line}", markup=False, soft_wrap=True)
