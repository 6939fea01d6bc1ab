"""`triage bench --input-len A,B,...`: parsing and validation, a real sweep against the reference server, compare
matching levels by (load, prompt length), the knee looked for within one prompt length, and SCHED006 reading it."""
from __future__ import annotations

import dataclasses
import io
import json

import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.factories import level
from triage.bench.extra_files import plots
from triage.bench.level_runner import check_sweep_fits
from triage.bench.live import LiveView
from triage.bench.options import BenchOptions, LoadOptions, WorkloadOptions
from triage.bench.records import RequestRecord, read_records
from triage.bench.run_config import URL_DEFAULTS, LevelSpec, base_config
from triage.bench.saturation import summary
from triage.cli import app
from triage.compare import compare_reports
from triage.compare.bench_diff import Verdict, level_key
from triage.compare.thresholds import parse_max_regression
from triage.core.errors import ReportError, UsageError
from triage.core.report import BenchSection, level_name
from triage.core.report_io import read_report, to_dict
from triage.core.snapshot import Snapshot
from triage.rules import RulesConfig, evaluate

runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})


def _cfg(**flags):
    """The run config of `triage bench --url http://127.0.0.1:8000` with these load and workload options."""
    load = {k: v for k, v in flags.items() if k in LoadOptions.__dataclass_fields__}
    workload = {k: v for k, v in flags.items() if k in WorkloadOptions.__dataclass_fields__}
    assert set(flags) == set(load) | set(workload), flags
    opts = BenchOptions(load=LoadOptions(**load), workload=WorkloadOptions(**workload))
    return base_config(opts, "http://127.0.0.1:8000", URL_DEFAULTS)


# ---- parsing and validation


def test_a_list_runs_every_load_level_once_per_length_shortest_first():
    cfg = _cfg(concurrency="1,4", input_len="2048,512")
    assert [spec.name for spec in cfg.levels] == ["c=1 in=512", "c=1 in=2048", "c=4 in=512", "c=4 in=2048"]
    assert cfg.input_len == 512 and cfg.input_lens == (512, 2048)
    block = to_dict(cfg.report_config())
    assert block["input_len_sweep"] == [512, 2048] and block["concurrency"] == [1, 4]


def test_one_length_keeps_the_levels_as_they_were():
    cfg = _cfg(concurrency="1,4", input_len="300")
    assert cfg.levels == (LevelSpec(concurrency=1), LevelSpec(concurrency=4))
    assert cfg.input_len == 300 and cfg.input_lens == ()
    assert "input_len_sweep" not in to_dict(cfg.report_config())
    assert _cfg(input_len=None).input_len == URL_DEFAULTS["input_len"]


@pytest.mark.parametrize(("value", "flags", "words"), [
    ("512,abc", {}, "e.g. 512,2048,8192"),
    ("512,0", {}, ">= 1"),
    ("512,512", {}, "twice"),
    ("64,2048", {"shared_prefix_len": 64}, "64 is not longer than --shared-prefix-len 64"),
])
def test_bad_lists_are_refused_with_the_fix(value, flags, words):
    with pytest.raises(UsageError, match=words.replace(".", r"\.")):
        _cfg(input_len=value, **flags)


def test_a_bad_list_exits_2_before_contacting_anything():
    result = runner.invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--input-len", "128,32",
                                 "--shared-prefix-len", "100"])
    assert result.exit_code == 2, result.output
    assert "--shared-prefix-len 100" in result.output and "Traceback" not in result.output


def test_a_sweep_length_beyond_the_servers_context_is_refused():
    cfg = _cfg(input_len="512,2048,8192", output_len=256)
    with pytest.raises(UsageError, match=r"--input-len 8192: the server's max_model_len is 4096.*at most 3839"):
        check_sweep_fits(cfg, 4096)
    check_sweep_fits(cfg, 16384)  # fits
    check_sweep_fits(cfg, None)  # unknown: nothing to check
    check_sweep_fits(_cfg(input_len="8192", output_len=256), 4096)  # one length is shortened to fit, as before


# ---- names, the knee, the live view (hand-built levels)


def _lv(c, input_len, ttft_p99, tput):
    lv = level(c, [ttft_p99 * 0.8, ttft_p99], [10.0, 11.0], [500.0, 520.0], tput)
    return dataclasses.replace(lv, input_len=input_len, input_tokens_mean=float(input_len or 512))


def test_level_names_carry_the_length_only_in_a_sweep():
    assert level_name(_lv(1, None, 100, 100)) == "c=1"
    assert level_name(_lv(1, 2048, 100, 100)) == "c=1 in=2048"
    assert level_key(_lv(1, 2048, 100, 100)) == ("concurrency", 1.0, 2048)
    assert to_dict(_lv(1, None, 100, 100))["input_len"] is None  # unmeasured is null, never a sentinel


def test_the_knee_is_looked_for_within_one_prompt_length():
    # Across lengths c=1 in=512 -> c=1 in=2048 looks like a knee (throughput down, TTFT x4); it is not load.
    levels = [_lv(1, 512, 100, 100), _lv(1, 2048, 400, 50), _lv(4, 512, 150, 300), _lv(4, 2048, 500, 150)]
    assert summary(levels)["knee_level"] is None
    # Within one length a real knee is still found.
    levels.append(_lv(16, 2048, 2000, 155))
    assert summary(levels)["knee_level"] == "c=4 in=2048"


def test_the_live_view_keeps_one_row_per_level_and_length():
    view = LiveView(Console(file=io.StringIO(), width=140, force_terminal=False))
    for n in (16, 64):
        spec = LevelSpec(concurrency=1, input_len=n)
        view.level_started(spec, 0, 1)
        view.record(RequestRecord(level=spec.name, repeat=0, index=0, warmup=False, t0_s=0.0, slot_wait_s=0.0,
                                  ttft_s=0.001 * n, output_tokens=4))
    view.level_finished(_lv(1, 16, 10, 10))
    assert list(view.rows) == ["c=1 in=16", "c=1 in=64"]
    assert view.rows["c=1 in=16"].finished and not view.rows["c=1 in=64"].finished
    assert view.rows["c=1 in=64"].ttft_ms == [64.0]


@pytest.mark.slow
def test_the_html_plots_each_length_apart_and_ttft_against_prompt_length():
    levels = (_lv(1, 512, 100, 100), _lv(4, 512, 150, 300), _lv(1, 2048, 400, 50), _lv(4, 2048, 500, 150))
    titles = [t for t, _ in plots(BenchSection(config={}, levels=levels))]
    assert "Latency percentiles vs concurrency (prompt 512 tokens)" in titles
    assert "Throughput vs concurrency (prompt 2048 tokens)" in titles
    assert "TTFT vs prompt length" in titles


# ---- a real sweep against the reference server


@pytest.fixture(scope="module")
def sweep_report(reference_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    result = runner.invoke(app, [
        "bench", "--url", reference_server.url, "--concurrency", "1", "--input-len", "16,64", "--num-requests", "4",
        "--warmup", "1", "--output-len", "4", "--json", str(out / "bench.json"), "--csv", str(out / "levels.csv"),
        "--jsonl", str(out / "requests.jsonl")])
    assert result.exit_code == 0, result.output
    return out


def test_a_real_sweep_gives_one_level_per_length(sweep_report, report_validator):
    report_validator(json.loads((sweep_report / "bench.json").read_text()))
    report = read_report(sweep_report / "bench.json")
    levels = report.bench.levels
    assert [(lv.concurrency, lv.input_len) for lv in levels] == [(1, 16), (1, 64)]
    assert all(lv.requests.completed == 4 and lv.requests.failed == 0 for lv in levels)
    short, long = (lv.input_tokens_mean for lv in levels)
    assert short < long
    # Sized in words from the server's own token counts: near the asked length, and the ratio is kept.
    assert short == pytest.approx(16, rel=0.4) and long == pytest.approx(64, rel=0.3)
    assert long / short > 2.5
    assert report.bench.config.input_len_sweep == (16, 64)
    names = {r.level for r in read_records(sweep_report / "requests.jsonl") if not r.warmup}
    assert names == {"c=1 in=16", "c=1 in=64"}
    frame = pd.read_csv(sweep_report / "levels.csv")
    assert list(frame["level"]) == ["c=1 in=16", "c=1 in=64"] and list(frame["input_len"]) == [16, 64]


def test_sched006_is_evaluated_on_a_sweep(sweep_report):
    section = read_report(sweep_report / "bench.json").bench
    only = frozenset({"SCHED006"})
    # The catalog's threshold judges growth from 8K tokens; the tiny model's sweep is shorter, so lower it.
    result = evaluate(Snapshot(), bench=section,
                      config=RulesConfig(enabled_only=only, thresholds={"SCHED006.min_context_tokens": 32}))
    assert "SCHED006" not in {s.code for s in result.skipped}
    # At the catalog default the rule still reads the sweep and names the length it lacks, not the sweep.
    default = evaluate(Snapshot(), bench=section, config=RulesConfig(enabled_only=only))
    (skip,) = default.skipped
    assert skip.code == "SCHED006" and "8192" in skip.reason
    # Without a sweep there is one length, and SCHED006 cannot run at any threshold.
    one = BenchSection(config={}, levels=section.levels[:1])
    lone = evaluate(Snapshot(), bench=one,
                    config=RulesConfig(enabled_only=only, thresholds={"SCHED006.min_context_tokens": 32}))
    assert [s.code for s in lone.skipped] == ["SCHED006"]


def test_compare_matches_a_real_sweep_level_by_level(sweep_report):
    report = read_report(sweep_report / "bench.json")
    result = compare_reports(report, report, parse_max_regression(None))
    assert {m.level for m in result.metrics} == {"c=1 in=16", "c=1 in=64"}
    assert not any(m.verdict is Verdict.REGRESSION for m in result.metrics)
    # A single-length run of the same server shares no level with the sweep: refused, naming both sides.
    single = dataclasses.replace(report, bench=dataclasses.replace(report.bench, levels=tuple(
        dataclasses.replace(lv, input_len=None) for lv in report.bench.levels[:1])))
    with pytest.raises(ReportError, match=r"base: c=1 in=16, c=1 in=64; candidate: c=1\)"):
        compare_reports(report, single, parse_max_regression(None))
