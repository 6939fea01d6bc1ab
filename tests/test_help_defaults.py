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


def _option_group_specs():
    import dataclasses

    from triage.baseline.config import BaselineOptions
    from triage.commands.baseline import BASELINE_OPTIONS
    from triage.commands.bench_options import BENCH_GROUPS
    from triage.commands.coldstart import COLDSTART_OPTIONS, ColdstartOptions
    from triage.commands.compare import COMPARE_OPTIONS
    from triage.commands.diagnose import DIAGNOSE_OPTIONS
    from triage.commands.plan import PLAN_OPTIONS
    from triage.commands.serve import SERVE_OPTIONS, ServeRequest
    from triage.commands.watch import WATCH_OPTIONS, WatchRequest
    from triage.compare.gate import CompareOptions
    from triage.diagnose.request import DiagnoseRequest
    from triage.plan.inputs import RawOptions

    groups = {**BENCH_GROUPS, "diagnose": (DiagnoseRequest, DIAGNOSE_OPTIONS), "plan": (RawOptions, PLAN_OPTIONS),
              "serve": (ServeRequest, SERVE_OPTIONS), "watch": (WatchRequest, WATCH_OPTIONS),
              "compare": (CompareOptions, COMPARE_OPTIONS), "baseline": (BaselineOptions, BASELINE_OPTIONS),
              "coldstart": (ColdstartOptions, COLDSTART_OPTIONS)}
    for group, (cls, spec) in groups.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        for name, (_, option) in spec.items():
            assert name in fields, (group, name)
            yield group, cls, name, option


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
