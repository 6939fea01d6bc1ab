"""The one error funnel and output sink shared by every command.

Commands return an exit code (0 ok, 1 gate tripped); errors become one line on stderr with the
contract's exit codes; a traceback reaches the user only with --debug.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from triage.cli_help import SETTINGS, click, manual  # noqa: F401 - manual: the commands' import
from triage.core.errors import EXIT_CANNOT, EXIT_INTERRUPTED, TriageError
from triage.core.redact import redact_text
from triage.core.report import Report, ReportKind
from triage.formats import Output, get, names_for, write


def console(stderr: bool = False, width: int | None = None) -> Console:
    no_color = SETTINGS.no_color or "NO_COLOR" in os.environ
    return Console(stderr=stderr, no_color=no_color, highlight=False, width=width,
                   soft_wrap=False, force_terminal=None if not no_color else False)


def notes(fmt: str) -> Console:
    """Where a command's notes go in format `fmt`: stdout after a view for people, stderr when stdout
    carries only the document (JSON, Markdown, JUnit)."""
    return console(stderr=not get(fmt).human)


def error(message: str) -> None:
    """One error line on stderr, with every secret we know the shape of (a URL's password, a key) redacted."""
    console(stderr=True).print(f"[bold red]triage: error:[/] {escape(redact_text(message))}", soft_wrap=True)


def warn(message: str) -> None:
    console(stderr=True).print(f"[yellow]triage: warning:[/] {escape(message)}", soft_wrap=True)


def funnel(fn: Callable[..., int | None]) -> Callable[..., None]:
    """Wrap a command: its return value is the exit code; errors map to the contract's codes."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except (typer.Exit, click.ClickException):
            raise
        except TriageError as e:
            if SETTINGS.debug:
                raise
            error(str(e))
            raise typer.Exit(e.exit_code) from None
        except (KeyboardInterrupt, typer.Abort):
            console(stderr=True).print("triage: interrupted", markup=False)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as e:
            if SETTINGS.debug:
                raise
            error(f"unexpected {type(e).__name__}: {e}. Re-run with --debug for the traceback, "
                  "and please report it.")
            raise typer.Exit(EXIT_CANNOT) from None
        ctx = kwargs.get("ctx")
        if ctx is not None and getattr(ctx, "invoked_subcommand", None):
            return  # a group's callback (`triage bench` before `merge`): the subcommand runs next
        raise typer.Exit(int(code or 0))

    return wrapper


OptionSpec = dict[str, tuple[Any, Any]]  # field -> (its type on the command line, its typer.Option)


def option_groups(**groups: tuple[type, OptionSpec]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Let a command take frozen option objects: each keyword names a parameter of the command and gives
    (the dataclass it receives, {field: (type, typer.Option(...))}). The command line lists every field of
    the group where that parameter stands, in the order given (help panels included); the command gets one object per group, lists
    as tuples, and an option left out (None) at its field's default."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        params = [field for p in sig.parameters.values() for field in _expanded(p, groups)]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for group, (cls, spec) in groups.items():
                given = {name: kwargs.pop(name) for name in spec}
                kwargs[group] = cls(**{name: _frozen(v) for name, v in given.items() if v is not None})
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return wrap


def _expanded(param: inspect.Parameter, groups: dict[str, tuple[type, OptionSpec]]) -> list[inspect.Parameter]:
    """A group's parameter as one keyword parameter per field; any other parameter as it is. Each option's
    default is its dataclass field's: written once, there (the spec's typer.Option says None)."""
    if param.name not in groups:
        return [param]
    cls, spec = groups[param.name]
    return [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=_with_default(option, field_default(cls, name)), annotation=kind)
            for name, (kind, option) in spec.items()]


def field_default(cls: type, name: str) -> Any:
    """A dataclass field's plain default (None for none, or for a factory: typer's lists start empty)."""
    found = next(f for f in dataclasses.fields(cls) if f.name == name)
    return None if found.default is dataclasses.MISSING else found.default


def _with_default(option: Any, default: Any) -> Any:
    if default is None or default == ():
        return option
    option = copy.copy(option)
    option.default = default
    return option


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def url_option(help: str) -> Any:
    """The `--url` every server-facing command takes (TRIAGE_URL in the environment works too)."""
    return typer.Option(None, "--url", envvar="TRIAGE_URL", help=help)


def json_option(panel: str | None = None) -> Any:
    return typer.Option(None, "--json", help="Also write the report JSON to this file.", rich_help_panel=panel)


def format_option(kind: ReportKind, panel: str | None = None) -> Any:
    """The `--format` option for a command that prints a `kind` report: its choices are the formats
    registered for that kind (`triage/formats/`), checked when the command line is parsed."""
    formats = names_for(kind)

    def check(value: str) -> str:
        if value not in formats:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(formats)}")
        return value

    return typer.Option("text", "--format", callback=check, help=f"Output on stdout: {', '.join(formats)}.",
                        rich_help_panel=panel)


def emit(report: Report, json_path: Path | None, fmt: str = "text",
         other_files: dict[str, Path | None] | None = None, detail: Any = None) -> None:
    """Write the report to --json FILE (if given) and show it in format `fmt` (`triage/formats/`; `detail`
    is what the format renders beyond the report, e.g. compare's result). Then say where every file went:
    the report JSON and `other_files` ({"JSONL": path, ...}, written by the command). On stdout after a
    view for people, on stderr otherwise (stdout then carries only the document)."""
    from triage.core.report_io import write_report

    if json_path is not None:
        write_report(report, json_path)
    shown = write(fmt, Output(report, console(), detail))
    if not shown.announces_files:
        return
    written = {"report": json_path, **(other_files or {})}
    lines = [f"{what} written to {path}" for what, path in written.items() if path is not None]
    if lines:
        out = notes(fmt)
        for line in lines:
            out.print(line, markup=False, soft_wrap=True)
