"""Every command's `--format` offers exactly the formats registered for the report kind it prints
(triage/formats/), and checks the value when the command line is parsed."""
from __future__ import annotations

import pytest
import typer

from triage.cli import app
from triage.cli_help import click
from triage.core.report import ReportKind
from triage.formats import get, names_for

KIND_OF = {
    ("triage", "diagnose"): ReportKind.DIAGNOSE,
    ("triage", "bench"): ReportKind.BENCH,
    ("triage", "bench", "merge"): ReportKind.BENCH,
    ("triage", "import"): ReportKind.BENCH,
    ("triage", "compare"): ReportKind.COMPARE,
    ("triage", "plan"): ReportKind.PLAN,
    ("triage", "baseline"): ReportKind.BASELINE,
    ("triage", "coldstart"): "coldstart",
}
# `triage engines list|show --format text|json` print engine facts, not a report: no kind of report to look up.
NOT_REPORTS = {("triage", "engines", "list"), ("triage", "engines", "show"), ("triage", "rules", "list")}


def _commands(cmd=None, path=("triage",)):
    cmd = cmd or typer.main.get_command(app)
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _commands(sub, (*path, name))


def _format_options():
    for path, cmd in _commands():
        for param in cmd.params:
            if "--format" in getattr(param, "opts", ()):
                yield path, cmd, param


def test_every_format_option_belongs_to_a_known_kind():
    paths = {path for path, _, _ in _format_options()}
    assert paths == set(KIND_OF) | NOT_REPORTS


@pytest.mark.parametrize("path", sorted(KIND_OF), ids=" ".join)
def test_format_choices_are_the_registrys(path):
    kind = KIND_OF[path]
    _, cmd, param = next(item for item in _format_options() if item[0] == path)
    offered = names_for(kind)
    assert param.help == f"Output on stdout: {', '.join(offered)}."
    ctx = click.Context(cmd)
    for name in offered:
        assert param.process_value(ctx, name) == name
        assert kind in get(name).writers
    for name in {"junit", "json", "markdown", "text", "xml"} - set(offered):
        with pytest.raises(typer.BadParameter):
            param.process_value(ctx, name)


def test_the_registry_keeps_the_public_names_and_their_order():
    assert names_for(ReportKind.COMPARE) == ("text", "markdown", "json", "junit")
    for kind in (ReportKind.DIAGNOSE, ReportKind.BENCH, ReportKind.PLAN, ReportKind.BASELINE):
        assert names_for(kind) == ("text", "json", "markdown")


def test_every_report_writing_command_takes_json_and_format_as_the_readme_says():
    """The README names the commands that write a report; each takes --json FILE and --format."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    said = re.search(r"Every command that writes a report \(([^)]*)\)", readme.replace("\n", " ")).group(1)
    named = [tuple(("triage " + c.strip(" `")).split()) for c in said.split(",")]
    assert len(named) >= 8, named
    by_path = {path: cmd for path, cmd in _commands()}
    for path in named:
        opts = {o for p in by_path[path].params for o in getattr(p, "opts", ())}
        assert {"--json", "--format"} <= opts, path
