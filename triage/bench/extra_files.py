"""Files besides the report JSON: a CSV of the levels (pandas) and a self-contained HTML page with matplotlib
plots embedded as base64 PNG (latency percentiles and throughput vs load, TTFT CDF, throughput-latency)."""
from __future__ import annotations

import base64
import html
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
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


AXIS_LABELS = {"concurrency": "concurrency", "request_rate": "request rate (req/s)"}


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
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for load, lvls in lines.items():
        ax.plot([lv.input_tokens_mean for lv in lvls], [lv.ttft_ms.p50 for lv in lvls], "-o", label=load)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prompt tokens (mean, from the server's usage)")
    ax.set_ylabel("TTFT p50 (ms)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    out = ("TTFT vs prompt length", _png(fig))
    plt.close(fig)
    return out


def _nan(value: float | None) -> float:
    return np.nan if value is None else value


def _load_axis(ax: Any, axis_name: str, x: list[float]) -> None:
    """The load axis shows the levels that were run (no 1.5 concurrency), log2 when they span a wide range."""
    ax.set_xlabel(axis_name)
    if axis_name == "concurrency" and max(x) > 4 * min(x):
        ax.set_xscale("log", base=2)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{v:g}" for v in x])
    ax.minorticks_off()


def plots(section: BenchSection) -> list[tuple[str, str]]:
    """(title, base64 PNG) for each plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = list(section.levels)
    out: list[tuple[str, str]] = []
    for axis_name, suffix, lvls in _series(levels):
        x = [lv.concurrency if lv.concurrency is not None else lv.request_rate for lv in lvls]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for metric, ax in zip(("ttft_ms", "tpot_ms"), axes, strict=True):
            for pct, style in (("p50", "-o"), ("p90", "--s"), ("p99", ":^")):
                y = [getattr(getattr(lv, metric), pct) for lv in lvls]
                ax.plot(x, [np.nan if v is None else v for v in y], style, label=pct)
            _load_axis(ax, axis_name, x)
            ax.set_ylabel(metric.removesuffix("_ms").upper() + " (ms)")
            ax.grid(alpha=0.3)
            ax.legend()
        out.append((f"Latency percentiles vs {axis_name}{suffix}", _png(fig)))
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 3.6))
        lines = ax.plot(x, [_nan(lv.output_tokens_per_s) for lv in lvls], "-o", label="output tokens/s")
        _load_axis(ax, axis_name, x)
        ax.set_ylabel("output tokens/s")
        ax.grid(alpha=0.3)
        if any(lv.goodput_requests_per_s is not None for lv in lvls):
            ax2 = ax.twinx()
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
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for lv in with_samples:
            values = np.sort(np.asarray(lv.samples["ttft_ms"]))
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post", label=level_name(lv))
        ax.set_xlabel("TTFT (ms)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
        ax.legend()
        out.append(("TTFT CDF", _png(fig)))
        plt.close(fig)

    points = [lv for lv in levels if lv.output_tokens_per_s is not None and lv.tpot_ms.p50 is not None]
    if points:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        ax.plot([lv.tpot_ms.p50 for lv in points], [lv.output_tokens_per_s for lv in points], "-o")
        for lv in points:
            ax.annotate(level_name(lv), (lv.tpot_ms.p50, lv.output_tokens_per_s), fontsize=8,
                        textcoords="offset points", xytext=(4, 4))
        ax.set_xlabel("TPOT p50 (ms) - latency per output token")
        ax.set_ylabel("output tokens/s")
        ax.grid(alpha=0.3)
        out.append(("Throughput-latency curve", _png(fig)))
        plt.close(fig)
    return out


def render_html(report: Report) -> str:
    from triage.render.bench import COLUMNS, detail_lines, row_cells

    section = report.bench
    if section is None:
        raise UsageError("the report has no bench section to render")
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row_cells(lv)) + "</tr>" for lv in section.levels)
    summary = "".join(f"<li>{esc(line)}</li>" for line in detail_lines(section))
    notes = "".join(f"<li>{esc(level_name(lv))}: {esc(n)}</li>" for lv in section.levels for n in lv.notes)
    figures = "".join(f"<h2>{esc(title)}</h2><img alt='{esc(title)}' src='data:image/png;base64,{png}'>"
                      for title, png in plots(section))
    findings = "".join(f"<li><b>{esc(f.code)}</b> [{esc(f.severity.value)}] {esc(f.title)}: {esc(f.message)}</li>"
                       for f in report.findings)
    target = report.target
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>triage bench</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
        "img{max-width:100%}</style></head><body>"
        f"<h1>triage bench</h1><p>{esc(str(target.url))} &middot; model {esc(str(target.model))} &middot; "
        f"engine {esc(str(target.engine))} &middot; {esc(report.created_at)} &middot; host "
        f"{esc(report.host.hostname)}</p>"
        f"<h2>Levels</h2><table><tr>{head}</tr>{rows}</table>"
        f"<h2>Summary</h2><ul>{summary}</ul>"
        + (f"<h2>Findings</h2><ul>{findings}</ul>" if findings else "")
        + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
        + figures + "</body></html>"
    )


def write_html(report: Report, path: Path) -> None:
    text = render_html(report)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--html {path}: cannot write it ({e.strerror or e})") from None
