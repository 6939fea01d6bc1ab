"""The bench levels table, the client verdicts, the saturation summary and the notes."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from triage.core.bench_data import LevelServer, Replica
from triage.core.report import BenchLevel, BenchSection, level_name
from triage.render.fmt import md_table, num

COLUMNS = ["level", "ok/fail", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms",
           "ITL p99 ms", "E2E p99 ms", "out tok/s", "goodput req/s", "valid"]
# The terminal's headers: two short lines each (the unit of the latencies is in the title), so that the
# numbers, not the headers, decide how wide a column is.
CONSOLE_HEADERS = ["level", "ok/\nfail", "TTFT\np50", "TTFT\np99", "TPOT\np50", "TPOT\np99", "ITL\np99",
                   "E2E\np99", "out\ntok/s", "goodput\nreq/s", "valid"]
# When the whole table is wider than the terminal it is split in two, each keeping the level column.
_LATENCY_PART = (0, 2, 3, 4, 5, 6, 7)
_LOAD_PART = (0, 1, 8, 9, 10)
_LEFT = ("level", "valid")


def row_cells(level: BenchLevel) -> list[str]:
    return [
        level_name(level),
        f"{level.requests.completed}/{level.requests.failed}",
        num(level.ttft_ms.p50), num(level.ttft_ms.p99),
        num(level.tpot_ms.p50), num(level.tpot_ms.p99),
        num(level.itl_ms.p99), num(level.e2e_ms.p99),
        num(level.output_tokens_per_s), num(level.goodput_requests_per_s, 2),
        "yes" if level.client.valid else "NO",
    ]


def detail_lines(section: BenchSection) -> list[str]:
    """Why a level is invalid, what failed, the client vs server TTFT gap, the saturation summary."""
    lines = [f"WARNING: {w}" for w in section.config.warnings]
    for level in section.levels:
        lines += _level_lines(level)
    summary = section.summary or {}
    lines += _summary_lines(summary)
    lines += find_max_lines(summary.get("find_max"))
    for note in section.config.notes:
        lines.append(f"note: {note}")
    return lines


def _level_lines(level: BenchLevel) -> list[str]:
    name = level_name(level)
    lines = []
    conns = level.connections
    if conns is not None and conns.retries:
        lines.append(f"{name}: {conns.retries} requests were sent again on a fresh connection: the server "
                     "had closed the reused one without answering")
    if not level.client.valid:
        lines.append(f"{name}: INVALID (client bottleneck): {level.client.invalid_reason}")
    if level.requests.errors_by_kind:
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(level.requests.errors_by_kind.items()))
        lines.append(f"{name}: errors: {kinds}")
    for rep in level.replicas or ():
        lines.append(_replica_line(name, rep))
    gap = level.server.client_minus_server_ttft_ms if level.server is not None else None
    if gap is not None:
        lines.append(f"{name}: client TTFT - server TTFT = {num(gap)} ms (mean)")
    return lines


def _replica_line(name: str, rep: Replica) -> str:
    """One replica's share of a level; with its role and the server's own time split where it exports one."""
    srv = rep.server or LevelServer()
    failed = f" ({rep.failed} failed)" if rep.failed else ""
    role = f", {rep.role}" if rep.role else ""
    line = (f"{name} replica {rep.replica} ({rep.url}{role}): {rep.requests} requests{failed}, TTFT p99 "
            f"{num(rep.ttft_ms.p99 if rep.ttft_ms else None)} ms, waiting {num(srv.num_requests_waiting_mean, 1)}, "
            f"KV max {num(srv.kv_cache_usage_frac_max, 2)}")
    split = [(label, v) for label, v in (("queue", srv.server_queue_time_ms_mean),
                                         ("prefill", srv.server_prefill_time_ms_mean),
                                         ("KV transfer", srv.kv_transfer_ms_mean),
                                         ("decode", srv.server_decode_time_ms_mean)) if v is not None]
    if split:
        line += "; server time: " + ", ".join(f"{label} {num(v)} ms" for label, v in split)
    return line


def _summary_lines(summary: dict) -> list[str]:
    if not summary:
        return []
    knee = summary.get("knee_level")
    lines = [f"knee: {knee} ({summary.get('knee_reason')})" if knee else "knee: none found"]
    if summary.get("best_goodput_level"):
        lines.append(f"best goodput: {summary['best_goodput_level']} "
                     f"({num(summary.get('best_goodput_requests_per_s'), 2)} req/s)")
    if summary.get("best_throughput_level"):
        lines.append(f"best throughput: {summary['best_throughput_level']} "
                     f"({num(summary.get('best_output_tokens_per_s'))} output tokens/s)")
    return lines


def find_max_lines(found: dict | None) -> list[str]:
    """`--find-max`: the answer, its bracket and why the search stopped."""
    if not found:
        return []
    unit = "" if found.get("mode") == "concurrency" else " req/s"
    slo = ", ".join(f"{k}<={v:g}" for k, v in (found.get("slo") or {}).items())
    target = f"{found.get('target_attainment', 0):.0%} of requests within {slo}"
    lo, hi = (found.get("bracket") or [None, None])[:2]
    if found.get("answer") is None:
        head = f"find-max: no load met {target}"
    else:
        head = f"find-max: highest {found['mode']} meeting {target}: {found['answer']:g}{unit}"
    bracket = f"bracket: passes at {lo if lo is not None else '-'}, fails at {hi if hi is not None else '(none tried)'}"
    return [head, f"find-max: {bracket}; {len(found.get('probes') or [])} levels, {found.get('requests_sent', 0)} "
                  f"requests; stopped: {found.get('stop_reason') or '-'}"]


def _needed_width(headers: list[str], rows: list[list[str]], per_column: int) -> int:
    widths = [max([len(line) for line in h.split("\n")] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return sum(widths) + per_column * len(headers) + 1


def _table(title: str, headers: list[str], rows: list[list[str]], width: int) -> Table:
    """A table that shows every number whole: with box lines if they fit, without them if not, and as a
    last resort (a very narrow terminal) numbers fold onto a second line. Never an ellipsis."""
    boxed = _needed_width(headers, rows, per_column=3) <= width
    table = Table(title=title, title_justify="left", box=box.HEAVY_HEAD if boxed else box.SIMPLE_HEAD,
                  show_edge=boxed)
    for header in headers:
        table.add_column(header, justify="left" if header in _LEFT else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def levels_console(section: BenchSection, out: Console) -> None:
    rows = [row_cells(level) for level in section.levels]
    title = "Load levels (latencies in ms)"
    if _needed_width(CONSOLE_HEADERS, rows, per_column=3) <= out.width:
        out.print(_table(title, CONSOLE_HEADERS, rows, out.width))
    else:
        for part, part_title in ((_LATENCY_PART, title), (_LOAD_PART, "Load levels: requests and throughput")):
            headers = [CONSOLE_HEADERS[i] for i in part]
            out.print(_table(part_title, headers, [[r[i] for i in part] for r in rows], out.width))
    for line in detail_lines(section):
        out.print(f"  {line}", markup=False)


def levels_markdown(section: BenchSection) -> str:
    text = "### Load levels\n\n" + md_table(COLUMNS, [row_cells(lv) for lv in section.levels])
    lines = detail_lines(section)
    if lines:
        text += "\n\n" + "\n".join(f"- {line}" for line in lines)
    return text
