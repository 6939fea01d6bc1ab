"""The fixes of the cold-start rules, through the engines registry: the engine that served (or, when the
snapshot does not say, the one whose start-up markers the log matched) and its knob at its version."""
from __future__ import annotations

from triage.core.probe_data import LogsData
from triage.engines import Knob, get
from triage.rules.context import Context


def startup_engine(ctx: Context):
    """(Engine module or None, version or None)."""
    info = ctx.engine()
    module = info.module
    if module is None:
        startup = ctx.seen(LogsData).startup
        module = get(startup.engine) if startup is not None else None
    return module, info.version


def knob_fix(ctx: Context, knob: str, value: str) -> tuple[tuple[str, ...], str]:
    """(commands, a sentence): the engine's flag or variable for `knob` set to `value`, or why it has none."""
    module, version = startup_engine(ctx)
    spec = module.knob(knob, version) if module is not None else None
    if spec is None:
        return (), "triage does not know this engine's setting for it"
    if not isinstance(spec, Knob):
        return (), f"{module.display}: {spec.reason}"
    if spec.is_env:
        cmd = f"export {spec.flag}={value}"
    else:
        shown = None if spec.value is None else spec.value.format(v=value)
        cmd = spec.flag if shown is None else f"{spec.flag} {shown}"
    note = f"{module.display}: {spec.flag if spec.is_env else cmd}" + (f" ({spec.note})" if spec.note else "")
    return (cmd,), note
