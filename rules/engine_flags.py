"""Fix builders: each tuning knob's flag for the server's engine *at the server's version*, rendered and checked
against the engine truth tables.

The knobs live in the engines registry (triage/engines/<engine>.py); a knob can change meaning between versions
(TGI 3.x ignores --max-batch-size while prefill chunking is on). Every flag a rule prints goes through
`render()`: the flag must exist in that version's table and the value must be one the engine's parser accepts.
Where the engine has no equivalent the fix says so instead of printing a near-miss. When the server's version is
unknown the newest table is used and the fix says so; a version between two tables is named as a gap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import triage.engines.truth as engine_truth
from triage.engines import GENERIC, Knob, NoEquivalent, get, with_flag_tables

__all__ = ["DISABLING_FLAGS", "DISABLING_OTHER", "KNOBS", "LAUNCHERS", "PRETTY", "Knob", "NoEquivalent", "Rendered",
           "checked_versions", "engine_flags", "render"]

LAUNCHERS = {e.name: e.launcher for e in with_flag_tables()}
PRETTY = {e.name: e.display for e in with_flag_tables()}
RULES_SCALE = "total"   # rules compute a memory share as the share of all GPU memory (vLLM's meaning)
# Each knob's flag per engine at the newest version (the per-version forms: Engine.knob(knob, version)).
KNOBS: dict[str, dict[str, Knob | NoEquivalent]] = {}
for _engine in with_flag_tables():
    for _knob in _engine.knobs:
        KNOBS.setdefault(_knob, {})[_engine.name] = _engine.knob(_knob)  # type: ignore[assignment]
# Flags that turn a default-on feature off (the fix is to remove them), and non-flag forms that do too.
DISABLING_FLAGS: dict[str, dict[str, str]] = {}
DISABLING_OTHER: dict[str, dict[str, str]] = {}
for _engine in with_flag_tables():
    for _feature, _flag in _engine.disabling.items():
        DISABLING_FLAGS.setdefault(_feature, {})[_engine.name] = _flag
    for _feature, _form in _engine.disabling_other.items():
        DISABLING_OTHER.setdefault(_feature, {})[_engine.name] = _form


@dataclass(frozen=True, slots=True)
class Rendered:
    engine: str
    knob: str
    text: str | None          # "--flag value", or None when there is nothing to print
    note: str | None          # why not, or what to know next to it
    version: str | None       # the table version it was checked against
    match: str = "exact"      # how the table was chosen: exact | patch | gap | unknown
    claims: tuple[str, ...] = ()


def render(knob: str, engine: str, value: object = None, version: str | None = None) -> Rendered:
    """One knob for one engine at one version, checked against that version's flags."""
    eng = get(engine)
    spec = eng.knob(knob, version) if eng is not None else None
    t = engine_truth.table(engine, version)
    tv, match = (t.version, t.match) if t else (None, "unknown")
    pretty = eng.display if eng is not None else engine
    if spec is None:
        return Rendered(engine, knob, None, f"{pretty} has no equivalent of {knob}", tv, match)
    if isinstance(spec, NoEquivalent):
        return Rendered(engine, knob, None, spec.reason, tv, match, spec.claims)
    val = None if spec.value is None else spec.value.format(v=value)
    if spec.is_env:
        text = spec.flag if val is None else f"{spec.flag}={val}"
        return Rendered(engine, knob, text, spec.note or None, tv, match, spec.claims)
    if t is not None:
        problem = t.check(spec.flag, val)
        if problem is not None:
            return Rendered(engine, knob, None, problem, tv, match, spec.claims)
    text = spec.flag if val is None else f"{spec.flag} {val}"
    return Rendered(engine, knob, text, spec.note or None, tv, match, spec.claims)


def _engine_of(engine: Any) -> tuple[str | None, str | None]:
    if engine is None or isinstance(engine, str):
        return engine, None
    return getattr(engine, "name", None), getattr(engine, "version", None)


def _which_table(r: Rendered, pretty: str, version: str | None) -> str:
    if r.match == "unknown" or version is None:
        return f" Flags as of {pretty} {r.version} (server version unknown)."
    if r.match == "gap":
        return f" Flags as of {pretty} {r.version}, the nearest table below {version} ({version} is not tabled)."
    if r.match == "patch":
        return f" Flags as of {pretty} {r.version} (same minor as {version})."
    return ""


def engine_flags(knobs: dict[str, object], engine: Any) -> tuple[tuple[str, ...], str]:
    """The flags that set `knobs` on the server's engine, plus a sentence with the other engines' equivalents
    and what was assumed.

    `engine`: an EngineInfo (name and version: pass it whole, so the fix is checked at the server's version) or
    an engine name. A known engine gets its flags, checked against its version (the newest tabled one when
    unknown, which the note names); an engine that takes another's flag names (the reference engine: vLLM's)
    gets that engine's. An unidentified engine gets no flag: the note names each engine's equivalent.
    The flags become one complete command where the server's own command line is known (rules/fix_commands.py).
    """
    name, version = _engine_of(engine)
    module = get(name)
    like = module.flags_like if module is not None and name not in LAUNCHERS else None
    if name in LAUNCHERS or like in LAUNCHERS:
        return _known(knobs, name if like is None else like, version if like is None else None,
                      None if like is None else module.display)
    equivalents, checked = [], []
    for eng in LAUNCHERS:
        rs = [render(k, eng, v) for k, v in _comparable(knobs, RULES_SCALE, eng).items()]
        flags = [r.text for r in rs if r.text]
        if flags:
            equivalents.append(f"{PRETTY[eng]} {' '.join(flags)}")
            checked.append(f"{PRETTY[eng]} {rs[0].version}")
    why = "the engine is not identified" if not name or name == GENERIC else f"{name} has no flag table"
    note = (f" No flag is offered: {why}. Its equivalents in the engines triage knows: {'; '.join(equivalents)} "
            f"(as of {', '.join(checked)}).") if equivalents else ""
    return (), note


def _known(knobs: dict[str, object], name: str, version: str | None, taken_by: str | None) -> tuple[tuple[str, ...], str]:
    """Flags for a tabled engine at `version`; `taken_by`: the engine that takes them as its own (reference)."""
    rendered = [render(k, name, v, version) for k, v in knobs.items()]
    cmds = tuple(r.text for r in rendered if r.text)
    notes = [r.note for r in rendered if r.note]
    others = []
    for other in LAUNCHERS:
        if other == name or taken_by is not None:
            continue
        flags = [r.text for r in (render(k, other, v)
                                  for k, v in _comparable(knobs, get(name).memory_share, other).items()) if r.text]
        if flags:
            others.append(f"{PRETTY[other]}: {' '.join(flags)}")
    note = ""
    if notes:
        note += f" {PRETTY[name]}: {'; '.join(notes)}."
    if taken_by is not None and cmds:
        note += f" The {taken_by} takes {PRETTY[name]}'s flag names (as of {PRETTY[name]} {rendered[0].version})."
    elif cmds and rendered:
        note += _which_table(rendered[0], PRETTY[name], version)
    if others:
        note += f" Equivalents: {'; '.join(others)}."
    return cmds, note


def _comparable(knobs: dict[str, object], share: str, target: str) -> dict[str, object]:
    """The knobs whose value carries over to `target`'s scale: a memory share computed on the `share` scale
    ("total": all the memory the engine takes, as vLLM's) means something else to an engine whose share leaves its
    activations out (SGLang's --mem-fraction-static), so it is not offered there as an equivalent."""
    engine = get(target)
    if engine is None or engine.memory_share == share:
        return knobs
    return {k: v for k, v in knobs.items() if k != "gpu_memory_utilization"}


def checked_versions() -> dict[str, list[str]]:
    """The versions every fix is checked against, per engine (tests/test_engine_conformance.py)."""
    return {e: engine_truth.versions(e) for e in LAUNCHERS}
