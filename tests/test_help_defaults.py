"""The default a help text quotes is the one the run uses (a new user found 0.9 in `plan --help` and 0.92 in
the plan, "capped at 256" where vLLM's 1024 held, and "4 x concurrency" where max(8, 4 x c) ran)."""
from __future__ import annotations

import json
import re

import typer
from typer.testing import CliRunner

from triage.bench.options import BenchOptions, LoadOptions
from triage.bench.run_config import EMBEDDED_DEFAULTS, URL_DEFAULTS, base_config
from triage.cli import app

runner = CliRunner(env={"COLUMNS": "100", "NO_COLOR": "1"})


def _help(command: str, option: str) -> str:
    cmd = typer.main.get_command(app).commands[command]
    (param,) = [p for p in cmd.params if option in getattr(p, "opts", ())]
    return " ".join(param.help.split())


def _plan(*flags: str) -> dict:
    out = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", *flags, "--format", "json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["plan"]["inputs"]


def test_plan_help_quotes_the_memory_share_and_lengths_the_plan_uses():
    inputs = _plan("--gpu", "h100-sxm")
    said = float(re.search(r"\(default ([\d.]+)", _help("plan", "--gpu-memory-utilization")).group(1))
    assert inputs["gpu_memory_utilization"] == said
    assert inputs["input_len"] == int(re.search(r"\(default (\d+)", _help("plan", "--input-len")).group(1))
    assert inputs["output_len"] == int(re.search(r"\(default (\d+)", _help("plan", "--output-len")).group(1))


def test_plan_help_says_the_max_num_seqs_each_gpu_gets():
    said = _help("plan", "--max-num-seqs")
    assert "1024 on GPUs of 70 GiB or more other than the A100" in said and "256 on the rest" in said
    assert _plan("--gpu", "h100-sxm")["max_num_seqs"] == 1024
    assert _plan("--gpu", "a100-80gb")["max_num_seqs"] == 256
    assert _plan("--gpu", "l4")["max_num_seqs"] == 256


def test_bench_help_quotes_the_request_count_and_levels_a_run_uses():
    said = _help("bench", "--num-requests")
    low, per_slot, seconds = map(int, re.search(
        r"larger of (\d+) and (\d+) x concurrency, or of \d+ and (\d+) s of arrivals", said).groups())
    cfg = base_config(BenchOptions(load=LoadOptions(concurrency="1,4,16", rate=None)), "http://x", URL_DEFAULTS)
    assert [cfg.requests_for(level) for level in cfg.levels] == [max(low, per_slot * c) for c in (1, 4, 16)]
    rated = base_config(BenchOptions(load=LoadOptions(rate="0.2,3")), "http://x", URL_DEFAULTS)
    assert [rated.requests_for(level) for level in rated.levels] == [max(low, round(seconds * r)) for r in (0.2, 3)]
    embedded = int(re.search(r"without --url: (\d+)\)", said).group(1))
    assert base_config(BenchOptions(), None, EMBEDDED_DEFAULTS).num_requests == embedded

    url_levels, embedded_levels = re.search(r"\(default ([\d,]+); without --url: ([\d,]+)\)",
                                            _help("bench", "--concurrency")).groups()
    for levels, defaults in ((url_levels, URL_DEFAULTS), (embedded_levels, EMBEDDED_DEFAULTS)):
        cfg = base_config(BenchOptions(), "http://x", defaults)
        assert ",".join(str(lv.concurrency) for lv in cfg.levels) == levels


def _option_groups():
    """Every command that takes option objects (`option_groups`): its path in the command tree, and the
    (dataclass, spec) of each group it takes."""
    from triage.baseline.config import BaselineOptions
    from triage.commands.baseline import BASELINE_OPTIONS
    from triage.commands.bench_options import BENCH_GROUPS
    from triage.commands.coldstart import COLDSTART_OPTIONS, ColdstartOptions
    from triage.commands.compare import COMPARE_OPTIONS
    from triage.commands.diagnose import DIAGNOSE_OPTIONS
    from triage.commands.engines import (
        ENGINES_LIST_OPTIONS,
        ENGINES_SHOW_OPTIONS,
        EnginesListOptions,
        EnginesShowOptions,
    )
    from triage.commands.import_cmd import IMPORT_OPTIONS, ImportOptions
    from triage.commands.plan import PLAN_OPTIONS
    from triage.commands.rules import (
        RULES_EXPLAIN_OPTIONS,
        RULES_LIST_OPTIONS,
        RulesExplainOptions,
        RulesListOptions,
    )
    from triage.commands.serve import SERVE_OPTIONS, ServeRequest
    from triage.commands.watch import WATCH_OPTIONS, WatchRequest
    from triage.compare.gate import CompareOptions
    from triage.diagnose.request import DiagnoseRequest
    from triage.plan.inputs import RawOptions

    return {
        ("triage", "bench"): list(BENCH_GROUPS.values()),
        ("triage", "diagnose"): [(DiagnoseRequest, DIAGNOSE_OPTIONS)],
        ("triage", "plan"): [(RawOptions, PLAN_OPTIONS)],
        ("triage", "serve"): [(ServeRequest, SERVE_OPTIONS)],
        ("triage", "watch"): [(WatchRequest, WATCH_OPTIONS)],
        ("triage", "compare"): [(CompareOptions, COMPARE_OPTIONS)],
        ("triage", "baseline"): [(BaselineOptions, BASELINE_OPTIONS)],
        ("triage", "coldstart"): [(ColdstartOptions, COLDSTART_OPTIONS)],
        ("triage", "import"): [(ImportOptions, IMPORT_OPTIONS)],
        ("triage", "rules", "list"): [(RulesListOptions, RULES_LIST_OPTIONS)],
        ("triage", "rules", "explain"): [(RulesExplainOptions, RULES_EXPLAIN_OPTIONS)],
        ("triage", "engines", "list"): [(EnginesListOptions, ENGINES_LIST_OPTIONS)],
        ("triage", "engines", "show"): [(EnginesShowOptions, ENGINES_SHOW_OPTIONS)],
    }


def _option_group_specs():
    import dataclasses

    for path, groups in _option_groups().items():
        for cls, spec in groups:
            fields = {f.name for f in dataclasses.fields(cls)}
            for name, (_, option) in spec.items():
                assert name in fields, (path, cls.__name__, name)
                yield " ".join(path), cls, name, option


def test_no_option_has_a_default_outside_a_dataclass_field():
    """Every command's options with a default fill a frozen dataclass through option_groups: no plain typer
    parameter carries a default of its own (a --format's `text`, as the shared helper writes it, and flags off
    excepted)."""
    from tests.test_cli_help import COMMANDS

    grouped = {path: {name for _, spec in groups for name in spec} for path, groups in _option_groups().items()}
    loose = [f"{' '.join(path)} {param.opts[0]}={param.default!r}" for path, cmd in COMMANDS for param in cmd.params
             if param.name not in grouped.get(path, ()) and "--format" not in param.opts
             and param.default not in (None, False, (), "") and not callable(param.default)]
    assert loose == []


def test_each_option_default_is_written_once_on_its_dataclass_field():
    """An option-group spec says None: its default is the field's (the shared --format helper excepted)."""
    doubled = [(group, name, option.default) for group, _, name, option in _option_group_specs()
               if option.default not in (None, ...) and name != "format"]
    assert doubled == []


def test_every_default_a_help_shows_is_the_value_the_command_receives():
    """For every option of every command: the parsed default (what the command is called with when the option
    is left out) is the one `--help` prints."""
    from tests.test_cli_help import COMMANDS
    from triage.cli_help import option_text

    problems, checked = [], 0
    for path, cmd in COMMANDS:
        if not hasattr(cmd, "make_context") or getattr(cmd, "commands", None):
            continue
        ctx = cmd.make_context(path[-1], [], resilient_parsing=True)
        for param in cmd.params:
            if param.param_type_name != "option" or param.hidden:
                continue
            shown = re.search(r"\[default: ([^\]]*)\]", option_text(param)[1])
            value = ctx.params.get(param.name)
            if shown is None:
                continue
            want = shown.group(1)
            got = (param.opts if value else param.secondary_opts)[0] if getattr(param, "is_flag", False) \
                and param.secondary_opts else ",".join(map(str, value)) if isinstance(value, (list, tuple)) \
                else str(getattr(value, "value", value))
            checked += 1
            if got != want:
                problems.append(f"{' '.join(path)} {param.opts[0]}: help says {want}, the command gets {got}")
    assert not problems, "\n".join(problems)
    assert checked >= 40, checked


def _as_help_shows(param, value) -> str | None:
    """How `--help` would quote `value` as `param`'s default (None: it quotes none)."""
    if value is None or value == () or value == "":
        return None
    if getattr(param, "is_flag", False):
        flags = param.opts if value else param.secondary_opts
        return flags[0] if flags else None
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(getattr(value, "value", value))


def test_every_default_a_help_shows_is_its_dataclass_fields():
    """For every command that takes option objects (import, rules and engines included): the default `--help`
    quotes beside an option is the default of the dataclass field the option fills (the one place it is
    written), and an option whose field has a default shows it (unless it hides it on purpose)."""
    from tests.test_cli_help import COMMANDS
    from triage.cli_help import option_text
    from triage.cli_support import field_default

    commands = dict(COMMANDS)
    problems, checked = [], 0
    for path, groups in _option_groups().items():
        params = {p.name: p for p in commands[path].params}
        for cls, spec in groups:
            for name in spec:
                param = params[name]
                if param.param_type_name != "option" or param.hidden or param.show_default is False:
                    continue
                shown = re.search(r"\[default: ([^\]]*)\]", option_text(param)[1])
                said = shown.group(1) if shown else None
                want = _as_help_shows(param, field_default(cls, name))
                checked += 1
                if said != want:
                    problems.append(f"{' '.join(path)} {param.opts[0]}: help says {said}, "
                                    f"{cls.__name__}.{name} defaults to {want}")
    assert not problems, "\n".join(problems)
    assert checked >= 100, checked
    assert {("triage", "import"), ("triage", "rules", "list"), ("triage", "engines", "show")} <= set(_option_groups())
