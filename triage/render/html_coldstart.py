"""`triage coldstart --html`: each start as a timeline (one lane per phase on a shared time axis in seconds, each
bar labelled with its seconds), plain HTML and CSS: no plotting library needed."""
from __future__ import annotations

import math
import os
import platform
from datetime import datetime, timezone

from triage.engines.startup import LABELS, PHASES
from triage.render.fmt import size_text
from triage.render.html_page import engine_label, esc, kv, page, section, table

COLOURS = {"process": "#9aa5b1", "download": "#e15759", "weight_load": "#4e79a7", "compile": "#f28e2b",
           "cuda_graph": "#d4a017", "kv_alloc": "#59a14f", "warmup": "#b07aa1", "api_server": "#76b7b2"}
OTHER = "#8c8c8c"

STYLE = """
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:4px 0 14px;font-size:15px}
.legend span{display:inline-flex;align-items:center;gap:7px}
.legend i{display:inline-block;width:14px;height:14px;border-radius:3px}
.gantt{display:grid;grid-template-columns:250px 1fr;column-gap:16px;margin:8px 0 6px}
.lane-label{font-size:15px;padding:5px 0;line-height:1.3}
.lane-label small{display:block;color:var(--muted);font-size:13px;line-height:1.2}
.track{position:relative;min-height:40px;border-left:1px solid #9aa5b1}
.grid{position:absolute;top:0;bottom:0;width:0;border-left:1px dashed #e3e7eb}
.bar{position:absolute;top:8px;height:24px;border-radius:4px;min-width:3px}
.bar.open{background-image:repeating-linear-gradient(45deg,rgba(255,255,255,.45) 0 6px,transparent 6px 12px)}
.sec{position:absolute;top:9px;font-size:14px;font-weight:600;line-height:22px;white-space:nowrap;
 font-variant-numeric:tabular-nums}
.sec.in{color:#fff;text-shadow:0 0 2px rgba(0,0,0,.35)}
.ready{position:absolute;top:0;bottom:0;border-left:2px solid var(--ok);z-index:2}
.axis{position:relative;height:46px;border-top:1px solid #57606a}
.tick{position:absolute;top:0;height:6px;border-left:1px solid #57606a}
.tick span{position:absolute;top:7px;transform:translateX(-50%);font-size:14px;color:var(--fg);
 font-variant-numeric:tabular-nums}
.ready-label{position:absolute;top:24px;font-size:14px;font-weight:600;color:var(--ok);white-space:nowrap}
.legend .line{width:3px;height:16px;border-radius:0;background:var(--ok)}
.axis-title{text-align:right;font-size:14px;color:var(--muted);padding-top:6px}
.run-head{font-size:16px;margin:20px 0 4px}
"""


def _fmt_s(x: float) -> str:
    return f"{x:.2f} s" if x < 10 else f"{x:.1f} s"


def _step(span: float) -> float:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) for an axis of `span` seconds: about 4 to 9 ticks."""
    raw = span / 8
    base = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)


def _phases(run: dict) -> list[dict]:
    return [p for p in (run.get("startup") or {}).get("phases") or [] if p.get("started_at_s") is not None]


def _end(run: dict) -> float:
    ends = [p["started_at_s"] + (p.get("seconds") or 0.0) for p in _phases(run)]
    return max([run.get("ready_s") or 0.0, *ends])


def occurred(report: dict) -> list[str]:
    """The phases some start went through (reached, finished or not), in the order a server meets them."""
    seen = {p["phase"] for run in report["runs"] for p in _phases(run)}
    return [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))


def _pct(x: float, scale: float) -> str:
    return f"{100 * x / scale:.2f}%"


def _bar(p: dict, scale: float) -> str:
    """One phase's bar at its start, as wide as it lasted, with its seconds inside when it fits, else beside it."""
    colour, start = COLOURS.get(p["phase"], OTHER), p["started_at_s"]
    if p.get("seconds") is None:  # reached, not finished: a short open bar and the words
        return (f'<div class="bar open" style="left:{_pct(start, scale)};width:14px;background:{colour}"></div>'
                f'<span class=sec style="left:calc({_pct(start, scale)} + 20px)">reached at {_fmt_s(start)}, '
                "not finished</span>")
    secs = p["seconds"]
    left, width, end = 100 * start / scale, 100 * secs / scale, 100 * (start + secs) / scale
    tip = esc(f"{p.get('label') or p['phase']}: {secs:.2f} s, from {start:.2f} s")
    bar = (f'<div class=bar title="{tip}" style="left:{left:.2f}%;width:{width:.2f}%;background:{colour}">'
           "</div>")
    text = _fmt_s(secs)
    if width >= 7:
        label = f'<span class="sec in" style="left:calc({left:.2f}% + 8px)">{text}</span>'
    elif end > 85:
        label = f'<span class=sec style="right:calc({100 - left:.2f}% + 6px)">{text}</span>'
    else:
        label = f'<span class=sec style="left:calc({end:.2f}% + 6px)">{text}</span>'
    return bar + label


def _lane_label(p: dict) -> str:
    extra = [b for b in (size_text(p.get("bytes")),
                         f"{p['bandwidth_bytes_per_s'] / 1e6:,.0f} MB/s" if p.get("bandwidth_bytes_per_s") else "")
             if b]
    small = f"<small>{esc(' at '.join(extra))}</small>" if extra else ""
    return f"<div class=lane-label>{esc(p.get('label') or LABELS.get(p['phase'], p['phase']))}{small}</div>"


def _timeline(run: dict, scale: float, step: float) -> str:
    ticks = [i * step for i in range(int(round(scale / step)) + 1)]
    grid = "".join(f'<div class=grid style="left:{_pct(t, scale)}"></div>' for t in ticks[1:])
    ready = run.get("ready_s")
    mark = (f'<div class=ready title="ready at {ready:.2f} s" style="left:{_pct(ready, scale)}"></div>'
            if ready else "")
    order = {name: i for i, name in enumerate(PHASES)}
    rows = "".join(_lane_label(p) + f"<div class=track>{grid}{mark}{_bar(p, scale)}</div>"
                   for p in sorted(_phases(run), key=lambda p: (p["started_at_s"], order.get(p["phase"], 99))))
    axis = "".join(f'<div class=tick style="left:{_pct(t, scale)}"><span>{t:g}</span></div>' for t in ticks)
    if ready:
        axis += (f'<div class=ready-label style="right:calc({100 - 100 * ready / scale:.2f}% + 5px)">'
                 f"ready {_fmt_s(ready)}</div>")
    return (f"<div class=gantt>{rows}<div class=axis-title>seconds since launch</div>"
            f"<div class=axis>{axis}</div></div>")


def _run_head(run: dict) -> str:
    kind = "cold" if run["run"] == 1 else "warm"
    ready = run.get("ready_s")
    outcome = f"ready in <b>{ready:.2f} s</b>" if run["outcome"] == "ready" and ready is not None else \
        f"<b>{esc(run['outcome'])}</b>"
    bits = [f"<b>Start {run['run']}</b> ({kind}): {outcome}"]
    if run.get("ttft_s") is not None and run.get("first_token_s") is not None:
        bits.append(f"first token {run['ttft_s'] * 1000:.0f} ms after ready ({run['first_token_s']:.2f} s "
                    "from launch)")
    start = run.get("startup") or {}
    if run.get("ready_s") and start.get("phases_total_s"):
        share = 100 * start["phases_total_s"] / run["ready_s"]
        if share <= 100:
            bits.append(f"the phases cover {share:.0f}% of it")
    return "<p class=run-head>" + ", ".join(bits) + "</p>"


def _run_body(run: dict, scale: float, step: float) -> str:
    out = _run_head(run)
    if _phases(run):
        out += _timeline(run, scale, step)
    else:
        out += ("<p class=muted>No start-up phase seen in its log"
                + ("" if run.get("startup") else " (the engine was not recognised)") + ".</p>")
    if run["outcome"] != "ready":
        if run.get("exit_code") is not None:
            out += f"<p>The server exited with code {run['exit_code']}.</p>"
        if run.get("last_lines"):
            out += "<p>Last log lines:</p><pre>" + esc("\n".join(run["last_lines"])) + "</pre>"
    if run.get("error"):
        out += f"<p>{esc(run['error'])}</p>"
    return out


def _title(report: dict) -> str:
    if report.get("engine"):
        return f"Cold start: {engine_label(report['engine'])}"
    words = [os.path.basename(str(a)) if i == 0 else str(a) for i, a in enumerate(report.get("argv") or [])][:3]
    short = " ".join(words) or "command"
    return f"Cold start: {short[:60] + '…' if len(short) > 60 else short}"


def render(report: dict, generated: str | None = None, host: str | None = None) -> str:
    """The coldstart report (triage/coldstart/run.py's dict) as one page."""
    runs = report.get("runs") or []
    scale_raw = max((_end(r) for r in runs), default=0.0) or 1.0
    step = _step(scale_raw)
    scale = math.ceil(scale_raw / step - 1e-9) * step
    names = occurred(report)
    legend = "".join(f'<span><i style="background:{COLOURS.get(n, OTHER)}"></i>{esc(LABELS.get(n, n))}</span>'
                     for n in names)
    cmd = "<pre class=cmd>$ " + esc(" ".join(str(a) for a in report.get("argv") or [])) + "</pre>"
    facts = [("engine", engine_label(report["engine"]) if report.get("engine")
              else "not recognised (phases need its log markers)"),
             ("server", report.get("url") or "not known"), ("starts", str(len(runs)))]
    body = [section("Command", cmd + kv(facts, mono=("server",)), "command")]
    if legend and any(r.get("ready_s") for r in runs):
        legend += '<span class=ready-key><i class=line></i>ready: the health route answers</span>'
    timelines = (f"<div class=legend>{legend}</div>" if legend else "") + "".join(
        _run_body(run, scale, step) for run in runs)
    if report.get("interrupted"):
        timelines += "<p><b>Interrupted</b> (Ctrl-C): the server was stopped; the phases shown are those it reached.</p>"
    body.append(section("Timeline", timelines or "<p>No start was made.</p>", "timeline"))
    warm = report.get("warm_vs_first")
    if warm:
        rows = [[LABELS.get(n, n), f"{p['first_s']:.2f}", f"{p['warm_median_s']:.2f}"]
                for n, p in warm["phases"].items()]
        body.append(section("First start against warm starts", (
            f"<p>First start {warm['first_ready_s']:.2f} s to ready, warm starts {warm['warm_ready_median_s']:.2f} s "
            f"(median): the first pays <b>{warm['saved_s']:+.2f} s</b>.</p>"
            + table(["phase", "first start (s)", "warm median (s)"], rows, full=False)), "warm"))
    when = generated or datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    meta = [("generated", when), ("host", host or report.get("host") or platform.node())]
    return page(_title(report), meta, body, head_extra=STYLE)
