"""Files besides the report JSON: a CSV of the levels (pandas) and a self-contained HTML page with matplotlib
plots embedded as base64 PNG (latency percentiles and throughput vs load, TTFT CDF, throughput-latency)."""
from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import numpy as np

from triage.bench.saturation import load_series
from triage.core.errors import UsageError
from triage.core.metric_names import LATENCY_FAMILIES, THROUGHPUT_METRICS
from triage.core.report import BenchLevel, BenchSection, Report, level_name

STAT_KEYS = ("mean", "std", "min", "p50", "p90", "p95", "p99", "max")
SERVER_KEYS = ("kv_cache_usage_frac_mean", "kv_cache_usage_frac_max", "num_requests_running_mean",
               "num_requests_waiting_mean", "num_preemptions_delta", "prefix_cache_hit_rate",
               "server_ttft_ms_mean", "server_queue_time_ms_mean", "client_minus_server_ttft_ms")


def level_row(level: BenchLevel) -> dict[str, Any]:
    row: dict[str, Any] = {
        "level": level_name(level), "concurrency": level.concurrency, "request_rate": level.request_rate,
        "input_len": level.input_len,
        "duration_s": level.duration_s, "completed": level.requests.completed, "failed": level.requests.failed,
        "errors_by_kind": ";".join(f"{k}={v}" for k, v in sorted(level.requests.errors_by_kind.items())),
    }
    for name in LATENCY_FAMILIES:
        stats = getattr(level, name)
        for key in STAT_KEYS:
            row[f"{name}_{key}"] = getattr(stats, key)
    for key in (*THROUGHPUT_METRICS, "slo_attainment_pct", "input_tokens_mean", "output_tokens_mean"):
        row[key] = getattr(level, key)
    row.update(client_cpu_pct=level.client.cpu_pct, client_event_loop_lag_ms_p99=level.client.event_loop_lag_ms_p99,
               client_achieved_concurrency=level.client.achieved_concurrency, client_valid=level.client.valid,
               client_invalid_reason=level.client.invalid_reason)
    for key in SERVER_KEYS:
        row[f"server_{key}" if not key.startswith("server_") else key] = getattr(level.server, key, None)
    return row


def write_csv(section: BenchSection, path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame([level_row(lv) for lv in section.levels])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(path, index=False)
    except OSError as e:
        raise UsageError(f"--csv {path}: cannot write it ({e.strerror or e})") from None


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", pad_inches=0.15)
    return base64.b64encode(buf.getvalue()).decode()


AXIS_LABELS = {"concurrency": "concurrency", "request_rate": "request rate (req/s)"}
# One figure fills the page's content width (about 1300 px at 110 dpi); the text is sized for that width.
WIDE = (12.0, 4.6)
STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "legend.fontsize": 11,
         "xtick.labelsize": 11, "ytick.labelsize": 11, "axes.spines.top": False, "axes.spines.right": False,
         "legend.framealpha": 0.85}


def _series(levels: list[BenchLevel]) -> list[tuple[str, str, list[BenchLevel]]]:
    """(axis label, title suffix, levels) per load curve; in an --input-len sweep, one per prompt length."""
    return [(AXIS_LABELS[axis], "" if length is None else f" (prompt {length} tokens)", series)
            for axis, length, series in load_series(levels)]


def _context_sweep_plot(levels: list[BenchLevel], plt: Any) -> tuple[str, str] | None:
    """TTFT p50 vs measured prompt tokens, one line per load level, log-log so that the slope is the growth
    exponent (1 linear, 2 quadratic attention). Only for an --input-len sweep."""
    lines: dict[str, list[BenchLevel]] = {}
    for lv in levels:
        if lv.input_len is not None and lv.input_tokens_mean and lv.ttft_ms.p50:
            lines.setdefault(level_name(lv, with_input_len=False), []).append(lv)
    lines = {k: sorted(v, key=lambda lv: lv.input_tokens_mean) for k, v in lines.items() if len(v) >= 2}
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=WIDE, layout="constrained")
    for load, lvls in lines.items():
        ax.plot([lv.input_tokens_mean for lv in lvls], [lv.ttft_ms.p50 for lv in lvls], "-o", label=load)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prompt tokens (mean, from the server's usage)")
    ax.set_ylabel("TTFT p50 (ms)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="best")
    out = ("TTFT vs prompt length", _png(fig))
    plt.close(fig)
    return out


def _nan(value: float | None) -> float:
    return np.nan if value is None else value


def _load_axis(ax: Any, axis_name: str, x: list[float]) -> None:
    """The load axis shows the levels that were run (no 1.5 concurrency), log2 when they span a wide range;
    a margin either side keeps the end markers and their labels inside the axes."""
    ax.set_xlabel(axis_name)
    if axis_name == "concurrency" and max(x) > 4 * min(x):
        ax.set_xscale("log", base=2)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{v:g}" for v in x])
    ax.minorticks_off()
    ax.margins(x=0.06, y=0.1)


def _label_points(ax: Any, points: list[tuple[float, float, str]]) -> None:
    """Each point's label inside the axes, where the rising curve is not: above and to the left of its point, or
    below and to the right near the top, so that no label is cut off at the plot's edge (the last level's c=64
    was); the margins leave room for it."""
    ax.margins(x=0.1, y=0.15)
    ax.figure.canvas.draw()  # settle the limits, then place each label by where its point lies
    to_axes = ax.transAxes.inverted()
    for x, y, text in points:
        top = to_axes.transform(ax.transData.transform((x, y)))[1] > 0.85
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(8, -8) if top else (-8, 6),
                    ha="left" if top else "right", va="top" if top else "bottom", fontsize=11,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})


def plots(section: BenchSection) -> list[tuple[str, str]]:
    """(title, base64 PNG) for each plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(STYLE):
        return _plots(list(section.levels), plt)


def _plots(levels: list[BenchLevel], plt: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for axis_name, suffix, lvls in _series(levels):
        x = [lv.concurrency if lv.concurrency is not None else lv.request_rate for lv in lvls]
        fig, axes = plt.subplots(1, 2, figsize=WIDE, layout="constrained")
        for metric, ax in zip(("ttft_ms", "tpot_ms"), axes, strict=True):
            for pct, style in (("p50", "-o"), ("p90", "--s"), ("p99", ":^")):
                y = [getattr(getattr(lv, metric), pct) for lv in lvls]
                ax.plot(x, [np.nan if v is None else v for v in y], style, label=pct)
            _load_axis(ax, axis_name, x)
            name = metric.removesuffix("_ms").upper()
            ax.set_title(f"{name} ({'time to first token' if name == 'TTFT' else 'time per output token'})")
            ax.set_ylabel(f"{name} (ms)")
            ax.grid(alpha=0.3)
            ax.legend(loc="upper left")
        out.append((f"Latency percentiles vs {axis_name}{suffix}", _png(fig)))
        plt.close(fig)

        fig, ax = plt.subplots(figsize=WIDE, layout="constrained")
        lines = ax.plot(x, [_nan(lv.output_tokens_per_s) for lv in lvls], "-o", label="output tokens/s")
        _load_axis(ax, axis_name, x)
        ax.set_ylabel("output tokens/s")
        ax.grid(alpha=0.3)
        if any(lv.goodput_requests_per_s is not None for lv in lvls):
            ax2 = ax.twinx()
            ax2.spines["right"].set_visible(True)
            lines += ax2.plot(x, [_nan(lv.goodput_requests_per_s) for lv in lvls], "--s", color="tab:green",
                              label="goodput req/s (right axis)", alpha=0.8)
            ax2.set_ylabel("goodput (req/s)")
        ax.legend(lines, [line.get_label() for line in lines], loc="upper left")
        out.append((f"Throughput vs {axis_name}{suffix}", _png(fig)))
        plt.close(fig)
    sweep = _context_sweep_plot(levels, plt)
    if sweep is not None:
        out.append(sweep)

    with_samples = [lv for lv in levels if lv.samples and lv.samples.get("ttft_ms")]
    if with_samples:
        fig, ax = plt.subplots(figsize=WIDE, layout="constrained")
        for lv in with_samples:
            values = np.sort(np.asarray(lv.samples["ttft_ms"]))
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", label=level_name(lv))
        ax.set_xlabel("TTFT (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.04)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        out.append(("TTFT CDF", _png(fig)))
        plt.close(fig)

    points = [lv for lv in levels if lv.output_tokens_per_s is not None and lv.tpot_ms.p50 is not None]
    if points:
        fig, ax = plt.subplots(figsize=WIDE, layout="constrained")
        ax.plot([lv.tpot_ms.p50 for lv in points], [lv.output_tokens_per_s for lv in points], "-o")
        ax.set_xlabel("TPOT p50 (ms) - latency per output token")
        ax.set_ylabel("output tokens/s")
        ax.grid(alpha=0.3)
        _label_points(ax, [(lv.tpot_ms.p50, lv.output_tokens_per_s, level_name(lv)) for lv in points])
        out.append(("Throughput-latency curve", _png(fig)))
        plt.close(fig)
    return out


def render_html(report: Report) -> str:
    """The bench report as one self-contained page: Summary, Workload & config, Results, Findings (each with
    its fix), Notes, then the plots."""
    from triage.render import html_bench
    from triage.render.html_page import engine_label, figure, page, section

    bench = report.bench
    if bench is None:
        raise UsageError("the report has no bench section to render")
    target = report.target
    figures = "".join(figure(title, png) for title, png in plots(bench))
    model = target.model or bench.config.model
    title = f"Bench: {model}" if model else "Bench report"
    meta = [("engine", engine_label(target.engine, target.engine_version)), ("server", target.url or ""),
            ("generated", report.created_at), ("host", report.host.hostname)]
    body = [html_bench.verdict(report), html_bench.workload(report), html_bench.results(bench),
            html_bench.findings(report), html_bench.notes(report), section("Plots", figures, "plots")]
    return page(title, meta, [b for b in body if b], footer=f"triage {report.triage_version} · "
                f"report schema {report.schema_version}")


def write_html(report: Report, path: Path) -> None:
    text = render_html(report)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--html {path}: cannot write it ({e.strerror or e})") from None
