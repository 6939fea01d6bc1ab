"""CSV, HTML, the live view and the rendered tables, from hand-built levels."""
from __future__ import annotations

import dataclasses
import io

import pandas as pd
import pytest
from rich.console import Console

from tests.factories import bench_report, level
from triage.bench.extra_files import plots, render_html, write_csv
from triage.bench.live import LiveView
from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec
from triage.bench.saturation import summary
from triage.core.bench_data import BenchRunConfig
from triage.core.report import BenchSection, ClientStats
from triage.render import markdown
from triage.render.fmt import num


def section() -> BenchSection:
    levels = [level(1, [100.0, 120.0], [10.0, 11.0], [500.0, 520.0], 100.0),
              level(4, [150.0, 170.0], [12.0, 14.0], [700.0, 720.0], 300.0, failed=1)]
    bad = ClientStats(cpu_pct=97.0, event_loop_lag_ms_p99=40.0, achieved_concurrency=10.0, valid=False,
                      invalid_reason="client CPU 97% of a core > 90%")
    levels.append(dataclasses.replace(level(16, [400.0, 450.0], [20.0, 22.0], [900.0, 990.0], 310.0), client=bad))
    return BenchSection(config=BenchRunConfig(endpoint="completions", notes=("NVML unavailable: test",)),
                        levels=tuple(levels), summary=summary(levels))


def test_csv_has_one_row_per_level_with_flat_columns(tmp_path):
    path = tmp_path / "levels.csv"
    write_csv(section(), path)
    frame = pd.read_csv(path)
    assert list(frame["level"]) == ["c=1", "c=4", "c=16"]
    assert frame.loc[1, "errors_by_kind"] == "http_500=1"
    assert frame.loc[0, "ttft_ms_p50"] == 110.0
    assert list(frame["client_valid"]) == [True, True, False]


@pytest.mark.slow
def test_html_embeds_the_plots_and_escapes_text(report_validator):
    sec = section()
    report = bench_report(sec.levels)
    report = dataclasses.replace(report, bench=sec)
    report_validator(report)
    titles = [t for t, _ in plots(sec)]
    assert titles == ["Latency percentiles vs concurrency", "Throughput vs concurrency", "TTFT CDF",
                      "Throughput-latency curve"]
    html = render_html(report)
    assert html.count("data:image/png;base64,") == 4
    assert "client CPU 97% of a core &gt; 90%" in html


def test_markdown_names_invalid_levels_and_the_summary():
    sec = section()
    report = bench_report(sec.levels)
    report = dataclasses.replace(report, bench=sec)
    text = markdown(report)
    assert "c=16: INVALID (client bottleneck): client CPU 97%" in text
    assert "c=4: errors: http_500 x1" in text
    assert "best throughput: c=4" in text  # the invalid c=16 is not a candidate


def test_live_view_tracks_progress_and_running_percentiles():
    out = Console(file=io.StringIO(), width=140, record=True, force_terminal=False)
    view = LiveView(out)
    spec = LevelSpec(concurrency=2)
    view.level_started(spec, 0, 3)
    for i, ttft in enumerate([0.010, 0.020, None]):
        view.record(RequestRecord(level="c=2", repeat=0, index=i, warmup=False, t0_s=0.0, slot_wait_s=0.0,
                                  ttft_s=ttft, output_tokens=5 if ttft else None,
                                  error_kind=None if ttft else "timeout"))
    out.print(view)
    text = out.export_text()
    assert "c=2" in text and "3/3" in text and "15.0" in text  # TTFT p50 of 10 and 20 ms
    row = view.rows["c=2"]
    assert (row.done, row.failed, row.output_tokens) == (3, 1, 10)


def _render(sec: BenchSection, width: int) -> str:
    from triage.render.bench import levels_console

    out = Console(file=io.StringIO(), width=width, record=True, force_terminal=False, no_color=True)
    levels_console(sec, out)
    return out.export_text()


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_levels_table_never_ellipsizes_a_number(width):
    # Wide numbers in every column: a 5-digit E2E p99, a 6-digit throughput.
    big = level(64, [900.0, 12000.0], [15.0, 19.5], [20000.0, 45678.9], 123456.7, failed=3)
    sec = BenchSection(config=BenchRunConfig(), levels=(*section().levels, big), summary=None)
    text = _render(sec, width)
    assert "…" not in text
    for whole in (num(big.e2e_ms.p99), num(big.ttft_ms.p99), "123,456.7", "2/3"):
        assert len(whole) >= 8 or whole == "2/3"
        assert whole in text, (whole, text)
    assert max(len(line) for line in text.splitlines()) <= width
