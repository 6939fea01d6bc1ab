"""Help that reads like a manual: every option says something, every command ends with examples, and
`triage bench --help` groups its options in panels."""
from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from triage.cli import app

BENCH_PANELS = ("Target", "Load", "Workload", "SLO & find-max", "Scale", "Output")


def _commands(cmd=None, path=("triage",)):
    """Every command of the CLI, groups included, from the typer/click command tree."""
    cmd = cmd or typer.main.get_command(app)
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands())


def _shown(help_text: str | None) -> str:
    """The help as the terminal shows it: plain text (no markup parser eats brackets)."""
    return (help_text or "").strip()


def bad_help(help_text: str | None) -> str | None:
    shown = _shown(help_text)
    if not shown:
        return "empty"
    if shown == ".":
        return "a bare '.'"
    if shown.endswith(" ."):
        return "ends in ' .'"
    return None


def test_the_tree_has_every_command():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"triage bench", "triage bench merge", "triage compare", "triage plan", "triage rules explain",
            "triage diagnose", "triage serve", "triage watch", "triage baseline", "triage import"} <= names


@pytest.mark.parametrize("text,problem", [("", "empty"), (".", "a bare '.'"),
                                          ("Cap on the batch .", "ends in ' .'"), ("Cap on the batch.", None)])
def test_bad_help_catches_what_plan_used_to_show(text, problem):
    assert bad_help(text) == problem


def test_every_option_and_argument_has_real_help():
    problems = []
    for path, cmd in COMMANDS:
        for param in cmd.params:
            if param.param_type_name not in ("option", "argument") or getattr(param, "hidden", False):
                continue
            why = bad_help(getattr(param, "help", None))
            if why:
                problems.append(f"{' '.join(path)} {param.opts[0]}: {why}")
    assert not problems, problems


def test_every_command_help_ends_with_two_or_three_examples():
    for path, cmd in COMMANDS:
        help_text = cmd.help or ""
        assert "\n\nExamples:\n\n" in help_text, " ".join(path)
        examples = help_text.rsplit("\n\nExamples:\n\n", 1)[1].splitlines()
        assert 2 <= len(examples) <= 3, (path, examples)
        for line in examples:
            words = line.split()
            assert words[0] == "triage", (path, line)
            if len(path) > 1:       # a subcommand's examples run that subcommand
                assert words[1:len(path)] == list(path[1:]), (path, line)


def test_bench_help_shows_its_panels_in_order_at_100_columns():
    out = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"}).invoke(app, ["bench", "--help"])
    assert out.exit_code == 0
    lines = out.output.splitlines()
    headers = [ln[:-1] for ln in lines if ln.endswith(":") and not ln.startswith(" ")]
    assert [h for h in headers if h in BENCH_PANELS] == list(BENCH_PANELS)
    # every bench option sits in one of the six panels (only --help stays in the default box)
    bench = dict(COMMANDS)[("triage", "bench")]
    loose = [p.opts[0] for p in bench.params if p.param_type_name == "option" and p.rich_help_panel is None]
    assert loose == [], loose
    assert {p.rich_help_panel for p in bench.params if p.param_type_name == "option"} == set(BENCH_PANELS)
    assert "Examples:" in out.output and "--repeat 3" in out.output


def test_serve_defaults_are_the_engines_own():
    """`triage serve`'s request and options take EngineConfig's defaults (from the torch-free engine_config);
    they may not drift apart."""
    import dataclasses

    from triage.commands.serve import ServeRequest
    from triage.reference_engine.engine.engine_config import EngineConfig

    engine = {f.name: f.default for f in dataclasses.fields(EngineConfig)}
    served = {f.name: f.default for f in dataclasses.fields(ServeRequest)}
    shared = sorted(set(engine) & set(served))
    assert len(shared) >= 15, shared
    assert {k: served[k] for k in shared} == {k: engine[k] for k in shared}
