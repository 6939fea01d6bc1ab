"""Every command's help, rendered at 80 and 100 columns by the one renderer (triage/cli_help.py), fails on
what a new user met: a cut option name, eaten brackets, a Python type name, text the option's own metadata
does not hold, and internal terms. Usage errors are one line, as every other error is."""
from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from tests.test_cli_help import COMMANDS
from triage.cli import app
from triage.cli_help import option_text

WIDTHS = (80, 100)
PYTHON_TYPES = re.compile(r"<(bool|int|str|float|path|url)>|\blist\[|\bPath\b|\bfloat range\b|\bint range\b"
                          r"|\{[a-z_]+\}|\.\.\.\]\.\.\.|NoneType|typing\.")
INTERNAL = re.compile(r"seed 0\d|\b00[0-4] §|§\s?\d|\bissue \d+|Before issue", re.IGNORECASE)
ANNOTATION = re.compile(r"\[(env: [^\]]+|default: [^\]]*|at least [^\]]+|at most [^\]]+|\S+ to \S+)\]")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _help(path: tuple[str, ...], cols: int) -> str:
    out = CliRunner(env={"COLUMNS": str(cols), "NO_COLOR": "1"}).invoke(app, [*path[1:], "--help"])
    assert out.exit_code == 0, out.output
    return out.output


CASES = [(path, cmd, cols) for path, cmd in COMMANDS for cols in WIDTHS]


@pytest.mark.parametrize("path,cmd,cols", CASES, ids=[f"{' '.join(p)}@{c}" for p, _, c in CASES])
def test_help_renders_whole_at_this_width(path, cmd, cols):
    text = _help(path, cols)
    flat = _flat(text)
    problems = []
    examples = text.partition("\nExamples:\n")[2].split("\n\n")[0].splitlines()
    for line in text.splitlines():
        if len(line) > cols and line not in examples:     # an example stays whole: it is copied, not read
            problems.append(f"wider than {cols}: {line!r}")
        if PYTHON_TYPES.search(line):
            problems.append(f"a Python type: {line!r}")
        if INTERNAL.search(line):
            problems.append(f"an internal term: {line!r}")
    for param in cmd.params:
        if param.param_type_name != "option" or param.hidden:
            continue
        names, body = option_text(param)
        for name in [*param.opts, *param.secondary_opts]:
            if not re.search(rf"(^|[\s,]){re.escape(name)}($|[\s,])", text, re.MULTILINE):
                problems.append(f"{name} is not shown whole")
        if _flat(f"{names} {body}") not in flat:
            problems.append(f"{param.opts[0]}: its help is not shown as written ({body[:60]!r})")
        help_text = _flat(param.help or "")
        rest = _flat(body.replace(help_text, "", 1)) if help_text else _flat(body)
        if _flat(ANNOTATION.sub("", rest)):
            problems.append(f"{param.opts[0]}: text the option does not hold: {rest!r}")
    assert not problems, "\n".join(problems)


def test_brackets_in_help_survive():
    """`[rules]` and `[thresholds]` were eaten by a markup parser."""
    text = _flat(_help(("triage", "rules", "list"), 100))
    assert "[rules] disable=[...] and [thresholds] overrides" in text


def test_the_commands_are_listed_in_the_order_a_user_needs_them():
    text = _help(("triage",), 100)
    listed = [ln.split()[0] for ln in text.partition("\nCommands:\n")[2].splitlines() if ln.startswith("  ") and
              not ln.startswith("   ")]
    assert listed[:4] == ["diagnose", "bench", "compare", "plan"], listed


def test_bench_usage_runs_without_a_subcommand():
    first = _help(("triage", "bench"), 100).splitlines()[0]
    assert first == "Usage: triage bench [OPTIONS]"


def test_a_usage_error_is_one_line_with_where_the_help_is():
    out = CliRunner(env={"COLUMNS": "100"}).invoke(app, ["serve", "--no-such-flag"])
    assert out.exit_code == 2
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert len(lines) == 1, out.output
    assert lines[0].startswith("triage: error: No such option: --no-such-flag")
    assert "triage serve --help" in lines[0] and "╭" not in out.output


def test_only_the_root_offers_shell_completion():
    """A command imported on demand is built as its own typer app: it must not grow completion options."""
    offered = [" ".join(path) for path, cmd in COMMANDS if len(path) > 1
               and any("--install-completion" in getattr(p, "opts", ()) for p in cmd.params)]
    assert offered == []
