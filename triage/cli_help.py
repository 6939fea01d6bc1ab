"""The one help renderer, and the one place usage errors are printed.

Every command's help is plain text drawn from click's own command model: the usage line, the command's
manual text, then its options grouped by panel, each option's names whole on the left and its help wrapped
on a hanging indent, with the default and the environment variable read from the option itself. Text is
never run through a markup parser, so brackets survive ("triage[engine]", "[rules]"). The width is the
terminal's (COLUMNS honoured), at most 120.

A usage error is one line on stderr, as every other error is: "triage: error: ... (see: triage X --help)"."""
from __future__ import annotations

import importlib
import shutil
import sys
import textwrap
import typing
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import typer
import typer.core
import typer.main

# The click that typer's commands are made of: typer 0.2x vendors its own copy (typer._click), older
# releases use the click package. Its exceptions must come from that one; parameters are read by duck typing.
click: Any = getattr(typer.core, "_click", None)
if click is None:  # pragma: no cover - typer without a vendored click
    import click


@dataclass
class Settings:
    """The root options every command honours (--debug, --no-color)."""
    debug: bool = False
    no_color: bool = False


SETTINGS = Settings()

MAX_WIDTH = 120
NAME_COLUMN = 30          # option names longer than this put their help on the next line
USAGE_ERROR = 2


def manual(summary: str, *examples: str) -> str:
    """A command's help as a manual page ends: the summary (paragraphs split by a blank line), then
    `Examples:` and two or three command lines, one a line (tests/test_cli_help.py checks every command)."""
    return summary + "\n\nExamples:\n\n" + "\n".join(f"  {e}" for e in examples)


def width() -> int:
    return max(40, min(MAX_WIDTH, shutil.get_terminal_size((80, 24)).columns))


def _is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "argument"


def _is_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False) or getattr(param, "count", False))


def _word(annotation: Any) -> str:
    """A word for a value's kind: N, X, PATH or TEXT (never a Python type name)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if args and typing.get_origin(annotation) not in (list, tuple):
        annotation = args[0]                       # Optional[X] -> X
    if isinstance(annotation, type) and issubclass(annotation, bool):
        return ""
    if isinstance(annotation, type) and issubclass(annotation, int):
        return "N"
    if isinstance(annotation, type) and issubclass(annotation, float):
        return "X"
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "PATH"
    return "TEXT"


def _metavar(param: Any) -> str:
    """What follows an option's name: its own metavar, its choices, or a word for its kind."""
    if not _is_argument(param) and _is_flag(param):
        return ""
    if param.metavar:
        return param.metavar.strip("<>").upper() if param.metavar.startswith("<") else param.metavar
    desc = getattr(param, "type_descriptor", None)
    annotation = getattr(desc, "annotation", str)
    many = bool(param.multiple or param.nargs == -1 or typing.get_origin(annotation) in (list, tuple))
    if getattr(desc, "is_choice", False):
        word = "{" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "}"
    elif _is_argument(param):
        word = param.name.upper()
    else:
        inner = typing.get_args(annotation)[0] if many and typing.get_args(annotation) else annotation
        word = _word(inner)
    return word + ("..." if many and _is_argument(param) else "")


def _default(param: Any) -> str | None:
    value = param.default
    if param.show_default is False or value is None or callable(value):
        return None
    if _is_flag(param) and not param.secondary_opts:
        return None
    if _is_flag(param):
        return (param.opts if value else param.secondary_opts)[0]
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else None
    return str(getattr(value, "value", value))


def _range(param: Any) -> str | None:
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is None and high is None:
        return None
    if low is not None and high is not None:
        return f"{low} to {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def option_text(param: Any) -> tuple[str, str]:
    """(the names column, the help column) of one option."""
    names = ", ".join([*param.opts, *param.secondary_opts])
    meta = _metavar(param)
    help_text = " ".join((param.help or "").split())
    extra = []
    if param.envvar and param.show_envvar is not False:
        envvars = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        extra.append(f"[env: {', '.join(envvars)}]")
    bounds = _range(param)
    if bounds is not None:
        extra.append(f"[{bounds}]")
    default = _default(param)
    if default is not None and default != "":
        extra.append(f"[default: {default}]")
    return (f"{names} {meta}".strip(), " ".join([help_text, *extra]).strip())


def _rows(rows: Iterable[tuple[str, str]], out: list[str], cols: int) -> None:
    """Two columns: names whole on the left, help wrapped on a hanging indent (its own line when long)."""
    rows = list(rows)
    left = min(NAME_COLUMN, max((len(n) for n, _ in rows), default=0)) + 4
    wrap = max(20, cols - left)
    for names, text in rows:
        body = textwrap.wrap(text, wrap, break_on_hyphens=False) or [""]
        if len(names) + 4 > left:
            out.append(f"  {names}")
            out.extend(" " * left + line for line in body if line)
        else:
            out.append(f"  {names:<{left - 2}}{body[0]}".rstrip())
            out.extend(" " * left + line for line in body[1:])


def _paragraphs(text: str, cols: int, indent: str = "  ") -> list[str]:
    """A manual text: paragraphs wrapped; after "Examples:" each line kept whole (a command to copy)."""
    out: list[str] = []
    body, _, examples = (text or "").partition("\n\nExamples:\n\n")
    for para in body.split("\n\n"):
        if para.strip():
            out += textwrap.wrap(" ".join(para.split()), cols - len(indent), initial_indent=indent,
                                 subsequent_indent=indent) + [""]
    if examples:
        out += ["Examples:", *(indent + line.strip() for line in examples.splitlines() if line.strip()), ""]
    return out


def _is_group(cmd: Any) -> bool:
    return hasattr(cmd, "list_commands")


def _first_sentence(text: str) -> str:
    first = " ".join((text or "").split("\n\n")[0].split())
    end = first.find(". ")
    return first if end < 0 else first[:end + 1]


def _summary(group: Any, ctx: Any, name: str) -> str | None:
    """A command's first sentence, for the list of commands (a lazy one's without importing it)."""
    commands = getattr(group, "commands", None)
    said = commands.summary(name) if isinstance(commands, LazyCommands) else None
    if said is not None:
        return said
    sub = group.get_command(ctx, name)
    return None if sub is None or sub.hidden else _first_sentence(sub.help or "")


def _usage(cmd: Any, ctx: Any) -> list[str]:
    path = ctx.command_path
    args = []
    for p in cmd.params:
        if _is_argument(p):
            word = _metavar(p)
            args.append(word if p.required else f"[{word}]")
    lines = [f"Usage: {' '.join([path, '[OPTIONS]', *args])}"]
    if _is_group(cmd):
        shown = f"{path} [OPTIONS] COMMAND [ARGS]..."
        if cmd.invoke_without_command:
            lines.append(f"       {shown}")
        else:
            lines = [f"Usage: {shown}"]
    return lines


def _panels(cmd: Any, ctx: Any) -> dict[str, list[tuple[str, str]]]:
    panels: dict[str, list[tuple[str, str]]] = {}
    arguments = [(_metavar(p), " ".join((getattr(p, "help", None) or "").split()))
                 for p in cmd.params if _is_argument(p)]
    if arguments:
        panels["Arguments"] = arguments
    for p in cmd.get_params(ctx):
        if getattr(p, "param_type_name", "") == "option" and not p.hidden:
            panels.setdefault(getattr(p, "rich_help_panel", None) or "Options", []).append(option_text(p))
    return panels


def render(cmd: Any, ctx: Any, cols: int | None = None) -> str:
    cols = cols or width()
    out = [*_usage(cmd, ctx), ""]
    out += _paragraphs(cmd.help or "", cols)
    for panel, rows in _panels(cmd, ctx).items():
        out.append(f"{panel}:")
        _rows(rows, out, cols)
        out.append("")
    if _is_group(cmd):
        listed = [(name, _summary(cmd, ctx, name)) for name in cmd.list_commands(ctx)]
        out.append("Commands:")
        _rows(((name, said) for name, said in listed if said is not None), out, cols)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def usage_error(e: Any) -> str:
    """One line: what was wrong and where the help is."""
    ctx = getattr(e, "ctx", None)
    where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    return f"triage: error: {e.format_message()}{where}"


@dataclass(frozen=True)
class Lazy:
    """A command registered by where it lives ("triage.commands.plan:plan", a function or a typer app) and its
    help; imported only when it runs or its own help is asked for."""
    target: str
    help: str
    context_settings: dict[str, Any] | None = None

    def load(self, name: str) -> Any:
        module, _, attr = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        if isinstance(obj, typer.Typer):
            command = typer.main.get_command(obj)
        else:
            single = typer.Typer(add_completion=False)
            single.command(name, cls=TriageCommand, context_settings=self.context_settings)(obj)
            command = typer.main.get_command(single)
        command.name, command.help = name, self.help
        return command


class LazyCommands(MutableMapping):
    """A group's commands: those loaded so far, and the rest loaded on first access by name."""

    def __init__(self, loaded: dict[str, Any], lazy: dict[str, Lazy]):
        self._loaded, self._lazy = dict(loaded), lazy

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded and name in self._lazy:
            self._loaded[name] = self._lazy[name].load(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)

    def __iter__(self):
        return iter(dict.fromkeys([*self._lazy, *self._loaded]))

    def __len__(self) -> int:
        return len(set(self._lazy) | set(self._loaded))

    def summary(self, name: str) -> str | None:
        """A command's first sentence without loading it (for the list of commands)."""
        return _first_sentence(self._lazy[name].help) if name in self._lazy and name not in self._loaded else None


class TriageCommand(typer.core.TyperCommand):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(render(self, ctx))


class TriageGroup(typer.core.TyperGroup):
    """A group: help from `render`; `lazy` commands imported only when used, listed first, in their order."""

    lazy: dict[str, Lazy] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.lazy:
            self.commands = LazyCommands(self.commands, self.lazy)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(render(self, ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """click's main, with a usage error said in one line (exit 2) and Ctrl-C as 130."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as e:
            no_args = type(e).__name__ == "NoArgsIsHelpError"     # `triage` alone: the help, as click shows it
            typer.echo(e.format_message() if no_args else usage_error(e), err=True)
            sys.exit(e.exit_code or USAGE_ERROR)
        except (typer.Abort, KeyboardInterrupt):
            typer.echo("triage: interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)
