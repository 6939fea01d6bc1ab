"""How an incident fixture is made: the engine's format string (formats.py, by ledger claim) filled with the
figures of a real incident, behind the engine's own line prefix.

    fill("vllm.log-kv-too-small-0.6", 29000, 23648)
    vllm0("11-21 15:08:44", "worker.py:498", level="ERROR") + fill(...)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.incidents.formats import FORMATS

_PH = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?(?:zu|lu|ld|u|[sdifgeExr])|\{[^{}]*\}")
_SPEC = re.compile(r":([<>^]?[+-]?\d*(?:,)?(?:\.\d+)?[bdefgs%]?)$")


def _one(ph: str, value: Any) -> str:
    if ph.startswith("%"):
        spec = ph[1:].replace("zu", "d").replace("lu", "d").replace("ld", "d")
        spec = spec[:-1] + "d" if spec.endswith("u") else spec
        if spec.endswith(("s", "r")):
            return str(value)
        return ("%" + spec) % value
    inner = ph[1:-1]
    if inner in ("", ":?", ":#?") or inner.endswith("=") or (m := _SPEC.search(inner)) is None or not m.group(1):
        return str(value)
    return format(value, m.group(1))


def fill(claim_id: str, *values: Any) -> str:
    """The claim's format string with its placeholders filled in order (printf, Python f-string, Rust)."""
    text = FORMATS[claim_id]
    left = list(values)

    def sub(m: re.Match[str]) -> str:
        if m.group() == "%%":
            return "%"
        if not left:
            raise ValueError(f"{claim_id}: more placeholders than values in {text!r}")
        return _one(m.group(), left.pop(0))

    out = _PH.sub(sub, text)
    if left:
        raise ValueError(f"{claim_id}: {len(left)} value(s) left over for {text!r}")
    return out.rstrip("\n").replace("\\n", "")


# Each engine's line prefix, as its logging configuration writes it.
def vllm0(when: str, where: str, level: str = "INFO") -> str:
    """vLLM V0: `INFO 11-21 15:07:28 worker.py:498] `."""
    return f"{level} {when} {where}] "


def vllm1(when: str, where: str, level: str = "INFO", proc: str | None = None) -> str:
    """vLLM V1: `(EngineCore_DP0 pid=123) INFO 11-21 15:07:28 [core.py:76] `."""
    return (f"({proc}) " if proc else "") + f"{level} {when} [{where}] "


def sglang(when: str, tp: int | None = None) -> str:
    return f"[{when}" + (f" TP{tp}" if tp is not None else "") + "] "


def tgi(when: str, level: str = "INFO", target: str = "text_generation_launcher") -> str:
    return f"{when}  {level} {target}: "


def ollama(when: str, source: str, level: str = "INFO") -> str:
    return f"time={when} level={level} source={source} "


@dataclass(frozen=True)
class Incident:
    name: str
    url: str                       # the public thread the figures and the cause come from
    engine: str
    version: str | None            # as the thread reports it (None: not stated)
    cause: str                     # what the thread established
    lines: tuple[str, ...]
    code: str | None               # the rule that must name the cause; None: a healthy log (nothing above LOW)
    fix_contains: tuple[str, ...] = ()     # the engine's own flags at the log's version, in the fix
    text_contains: tuple[str, ...] = ()    # in the title or message
    severity: str | None = None
    quiet: tuple[str, ...] = ()            # rules that must not fire (a harmless warning, history)
    note: str = ""                         # how the fixture differs from the thread's text
    named: bool = True                     # the log holds a line of the engine's own (else: only NCCL's, torch's)
    figures: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        head = [f"# Built from {self.engine}'s format strings (tests/incidents/formats.py) with the figures of",
                f"# {self.url} ({self.engine} {self.version or 'version not stated'}).",
                f"# The thread's cause: {self.cause}"]
        head += [f"# {self.note}"] if self.note else []
        return "\n".join(head + list(self.lines)) + "\n"
