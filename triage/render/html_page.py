"""The one look of triage's HTML reports (bench, coldstart): a stylesheet and a page skeleton (header with the
title, when and where it was made; sections), plus the small pieces both reports build from. Self-contained:
no external font, script or stylesheet, so that the file can be mailed or attached to a ticket as it is."""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from triage.engines import get

esc = html.escape

STYLE = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d8dee4;--soft:#f6f8fa;--accent:#0969da;
 --crit:#a40e26;--high:#cf222e;--medium:#9a6700;--low:#0969da;--info:#6e7781;--ok:#1a7f37}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--fg);background:#fff;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,
 "Helvetica Neue",Arial,"Noto Sans","Liberation Sans",sans-serif}
main{max-width:1300px;margin:0 auto;padding:28px 32px 56px}
header.page{border-bottom:2px solid var(--line);padding-bottom:14px}
header.page h1{font-size:30px;line-height:1.25;margin:0 0 6px;font-weight:650;letter-spacing:-.01em}
.meta{color:var(--muted);font-size:15px;display:flex;flex-wrap:wrap;gap:4px 22px}
.meta b{color:var(--fg);font-weight:600}
section{margin-top:34px}
h2{font-size:22px;margin:0 0 14px;padding-bottom:6px;border-bottom:1px solid var(--line);font-weight:650}
h3{font-size:18px;margin:22px 0 8px;font-weight:600}
p{margin:8px 0}
ul{margin:8px 0;padding-left:22px}li{margin:3px 0}
.muted{color:var(--muted)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,"SF Mono",Menlo,Consolas,"Liberation Mono",monospace;font-size:14px}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px 14px;margin:8px 0;
 white-space:pre-wrap;overflow-wrap:anywhere}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;font-size:15px;min-width:60%}
table.full{width:100%}
th,td{padding:7px 12px;border-bottom:1px solid var(--line);text-align:right;vertical-align:top}
th{background:var(--soft);font-weight:600;white-space:nowrap;border-bottom:2px solid var(--line)}
td{font-variant-numeric:tabular-nums}
th:first-child,td:first-child{text-align:left;white-space:nowrap}
tbody tr:hover{background:#f3f6fa}
td.bad{color:var(--high);font-weight:700}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:6px 28px;margin:0;font-size:15px}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;overflow-wrap:anywhere}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(380px,1fr));gap:8px 48px}
.verdict{border:1px solid var(--line);border-left:8px solid var(--ok);border-radius:8px;padding:14px 18px;
 background:#f6fbf7;font-size:18px}
.verdict.sev-critical,.verdict.sev-high{border-left-color:var(--high);background:#fff6f6}
.verdict.sev-medium{border-left-color:var(--medium);background:#fffbf0}
.verdict.sev-low,.verdict.sev-info{border-left-color:var(--low);background:#f5f9ff}
.verdict b{font-weight:650}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px;margin:16px 0}
.tile{border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.tile .k{color:var(--muted);font-size:14px}.tile .v{font-size:22px;font-weight:650}.tile .s{font-size:14px}
.badge{display:inline-block;padding:1px 9px;border-radius:11px;font-size:13px;font-weight:700;color:#fff;
 text-transform:uppercase;letter-spacing:.03em;vertical-align:2px}
.badge.sev-critical{background:var(--crit)}.badge.sev-high{background:var(--high)}
.badge.sev-medium{background:var(--medium)}.badge.sev-low{background:var(--low)}.badge.sev-info{background:var(--info)}
.badge.opportunity{background:#fff;color:var(--ok);border:1px solid var(--ok)}
.finding{border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:14px 0}
.finding h3{margin:0 0 6px}
.finding .code{color:var(--muted);font-weight:600;margin:0 4px}
.finding table{min-width:0;margin:6px 0 10px}
.finding td:last-child{overflow-wrap:anywhere}
.fix{background:#eef8f0;border:1px solid #b7e1c1;border-radius:6px;padding:10px 14px;margin-top:10px}
.fix pre{background:#fff;margin:6px 0 0}
figure{margin:18px 0 30px}
figcaption{font-weight:600;font-size:17px;margin-bottom:8px}
figure img{display:block;width:100%;height:auto;border:1px solid var(--line);border-radius:6px}
footer{margin-top:44px;color:var(--muted);font-size:14px;border-top:1px solid var(--line);padding-top:10px}
@media print{main{max-width:none;padding:0}section{break-inside:avoid-page}}
"""


def engine_label(name: str | None, version: str | None = None) -> str:
    """The engine as people call it (the registry's display name: vLLM, SGLang, TGI), with its version; a name
    the registry does not know as it stands."""
    if not name:
        return "unknown engine"
    engine = get(name)
    label = engine.display if engine is not None else str(name)
    return f"{label} {version}" if version else label


def section(title: str, body: str, anchor: str | None = None) -> str:
    ident = f' id="{esc(anchor)}"' if anchor else ""
    return f"<section{ident}><h2>{esc(title)}</h2>{body}</section>"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], full: bool = True,
          bad: Iterable[str] = ("NO",)) -> str:
    """A table of escaped text: the first column left-aligned, the rest right-aligned (numbers); a cell whose
    text is in `bad` is shown in red."""
    flags = set(bad)
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td{' class=bad' if c in flags else ''}>{esc(c)}</td>" for c in row)
                   + "</tr>" for row in rows)
    return (f"<div class=table-wrap><table{' class=full' if full else ''}><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def kv(pairs: Iterable[tuple[str, str]], mono: Iterable[str] = ()) -> str:
    """A two-column list of label and value (escaped); the values of the labels in `mono` in monospace."""
    code = set(mono)
    items = "".join(f"<dt>{esc(k)}</dt><dd{' class=mono' if k in code else ''}>{esc(v)}</dd>" for k, v in pairs)
    return f"<dl class=kv>{items}</dl>"


def bullets(lines: Iterable[str]) -> str:
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f"<ul>{items}</ul>" if items else ""


def figure(title: str, png_base64: str) -> str:
    return (f"<figure><figcaption>{esc(title)}</figcaption>"
            f"<img alt=\"{esc(title)}\" src=\"data:image/png;base64,{png_base64}\"></figure>")


def page(title: str, meta: Sequence[tuple[str, str]], body: Sequence[str], footer: str = "",
         head_extra: str = "") -> str:
    """The whole document: `title` as the tab's title and the page's heading, `meta` (label, value) pairs under
    it (when it was made, the host, the target), then the sections in `body` (HTML already)."""
    facts = "".join(f"<span>{esc(k)} <b>{esc(v)}</b></span>" for k, v in meta if v)
    foot = f"<footer>{esc(footer)}</footer>" if footer else ""
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{STYLE}{head_extra}</style></head>\n<body><main>"
            f"<header class=page><h1>{esc(title)}</h1><div class=meta>{facts}</div></header>\n"
            + "\n".join(body) + f"\n{foot}</main></body></html>\n")
