"""A fix that can run as printed. A rule gives its fix as text plus the flags that set it (`--max-model-len
512`, `OLLAMA_NUM_PARALLEL=4`); here they become one complete command where the server's own command line is
known (the flags set on it, an old value replaced), and otherwise stay flags: `Fix.commands` holds only
commands that run as printed, `Fix.flags` what to set on a command line triage has not seen. Pure."""
from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import replace

from triage.core.report import Fix

_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def is_fragment(text: str) -> bool:
    """A flag or environment setting, not a command: `--x 1`, `-tp 2`, `OLLAMA_X=1`."""
    return text.startswith("-") or bool(_ENV.match(text))


def _flag_name(token: str) -> str:
    return token.split("=", 1)[0]


def _opposite(name: str) -> str:
    """`--enable-x` <-> `--no-enable-x`: setting one removes the other."""
    return "--" + name[len("--no-"):] if name.startswith("--no-") else "--no-" + name[2:]


def without(argv: list[str], name: str) -> list[str]:
    """`argv` with every `name`, `name=V` and `name V` removed (a value is the next token unless it is a flag)."""
    out, skip = [], False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        if _flag_name(token) == name:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            skip = "=" not in token and nxt is not None and not nxt.startswith("-")
            continue
        out.append(token)
    return out


def with_settings(argv: Sequence[str], settings: Sequence[str]) -> str:
    """The command `argv` with each setting applied: a flag replaces its old value (and its --no- twin), an
    environment setting goes in front."""
    env: list[str] = []
    args = list(argv)
    for setting in settings:
        if _ENV.match(setting):
            env = [e for e in env if e.split("=", 1)[0] != setting.split("=", 1)[0]] + [setting]
            continue
        tokens = shlex.split(setting)
        name = _flag_name(tokens[0])
        if name.startswith("--"):
            args = without(without(args, name), _opposite(name))
        else:
            args = without(args, name)
        args += tokens
    return "".join(f"{e} " for e in env) + shlex.join(args)


def complete(fix: Fix, launch: Sequence[str] | None) -> Fix:
    """`fix` with its flag fragments merged into the server's command (`launch`, its argv) when known, else
    moved to `flags`."""
    fragments = [c for c in fix.commands if is_fragment(c)]
    if not fragments:
        return fix
    commands = tuple(c for c in fix.commands if not is_fragment(c))
    if launch:
        return replace(fix, commands=commands + (with_settings(launch, fragments),))
    return replace(fix, commands=commands, flags=fix.flags + tuple(fragments))
