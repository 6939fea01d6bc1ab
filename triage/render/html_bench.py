"""The bench report's HTML sections (the plots are drawn by triage/bench/extra_files.py, which puts the page
together): the verdict, the workload and configuration, the results table, the findings with their fixes, and
the notes said in plain words."""
from __future__ import annotations

from triage.core.bench_data import BenchRunConfig
from triage.core.convert import to_dict
from triage.core.report import BenchSection, Finding, FindingKind, Report, level_name
from triage.render.bench import COLUMNS, detail_lines, row_cells
from triage.render.fmt import evidence_value, num
from triage.render.html_page import bullets, engine_label, esc, kv, section, table

# What a probe's error text means to someone reading the report: (text it contains, what to say). Matched in
# order, case-insensitively, on the notes the bench run left (GPU sampling via NVML, triage/bench/server_scrape.py).
_PLAIN = (
    ("pynvml is not installed", "GPU metrics not read: the pynvml Python package is not installed on this host"),
    ("library not found", "no NVIDIA driver library on this host: GPU metrics not read"),
    ("driver not loaded", "the NVIDIA driver is not loaded on this host: GPU metrics not read"),
    ("insufficient permissions", "no permission to query the NVIDIA driver: GPU metrics not read"),
    ("no permission", "no permission to query the NVIDIA driver: GPU metrics not read"),
    ("nvml found no gpu", "no NVIDIA GPU found on this host: GPU metrics not read"),
    ("nvml unavailable", "the NVIDIA driver could not be queried: GPU metrics not read"),
)


def plain_note(note: str) -> str:
    """A run note as a user reads it: an internal probe error (NVML's) said in words, anything else unchanged."""
    low = note.lower()
    for needle, words in _PLAIN:
        if needle in low:
            return words
    return note


# detail_lines' lines that the summary's tiles already show (the saturation summary) or that go to Notes.
_IN_TILES = ("note: ", "knee: ", "best goodput: ", "best throughput: ")


def _config(report: Report) -> BenchRunConfig:
    return report.bench.config if report.bench is not None else BenchRunConfig()


def _worst(findings: list[Finding]) -> Finding | None:
    return min(findings, key=lambda f: f.severity.rank, default=None)


def verdict(report: Report) -> str:
    """The Summary section: one line that says how it went, the key numbers, then the run's own details
    (invalid levels, errors, the saturation summary) as the text report gives them."""
    section_ = report.bench
    assert section_ is not None
    problems = [f for f in report.findings if f.kind is not FindingKind.OPPORTUNITY]
    opportunities = len(report.findings) - len(problems)
    worst = _worst(problems)
    more = f" and {opportunities} opportunit{'y' if opportunities == 1 else 'ies'}" if opportunities else ""
    if worst is None:
        head, css = f"<b>No problems found</b>{esc(more)}: nothing triage checks looks wrong in this run.", "ok"
    else:
        n = len(problems)
        head = (f"<b>{n} problem{'s' if n > 1 else ''} found</b>{esc(more)}. Most severe: "
                f"<span class='badge sev-{worst.severity.value}'>{esc(worst.severity.value)}</span> "
                f"{esc(worst.title)}.")
        css = f"sev-{worst.severity.value}"
    levels = section_.levels
    invalid = [level_name(lv) for lv in levels if not lv.client.valid]
    done = sum(lv.requests.completed for lv in levels)
    failed = sum(lv.requests.failed for lv in levels)
    summary = section_.summary or {}
    tiles = [("levels run", f"{len(levels)}", f"{len(invalid)} invalid ({', '.join(invalid)})" if invalid
              else "all valid"),
             ("requests", f"{done:,} ok", f"{failed:,} failed" if failed else "none failed")]
    if summary.get("best_throughput_level"):
        tiles.append(("best throughput", f"{num(summary.get('best_output_tokens_per_s'))} tok/s",
                      f"output tokens, at {summary['best_throughput_level']}"))
    if summary.get("best_goodput_level"):
        tiles.append(("best goodput", f"{num(summary.get('best_goodput_requests_per_s'), 2)} req/s",
                      f"within the SLO, at {summary['best_goodput_level']}"))
    if summary:
        knee = summary.get("knee_level")
        tiles.append(("saturation knee", knee or "none found", summary.get("knee_reason") or "" if knee else
                      "latency held across the levels run"))
    cards = "".join(f"<div class=tile><div class=k>{esc(k)}</div><div class=v>{esc(v)}</div>"
                    f"<div class='s muted'>{esc(s)}</div></div>" for k, v, s in tiles)
    details = [line for line in detail_lines(section_) if not line.startswith(_IN_TILES)]
    body = f"<div class='verdict {css}'>{head}</div><div class=tiles>{cards}</div>"
    if details:
        body += "<h3>Details</h3>" + bullets(details)
    return section("Summary", body, "summary")


def _levels_text(config: BenchRunConfig, section_: BenchSection) -> list[tuple[str, str]]:
    conc = config.concurrency or sorted({lv.concurrency for lv in section_.levels if lv.concurrency})
    rates = config.request_rate or sorted({lv.request_rate for lv in section_.levels if lv.request_rate})
    out = []
    if conc:
        out.append(("concurrency levels", ", ".join(str(c) for c in conc)))
    if rates:
        burst = config.burstiness
        out.append(("request rates", ", ".join(f"{r:g}/s" for r in rates)
                    + (f" (burstiness {burst:g})" if isinstance(burst, (int, float)) and burst != 1 else "")))
    return out


def _lengths(config: BenchRunConfig) -> list[tuple[str, str]]:
    out = []
    dist = config.len_dist
    dist = f" ({dist})" if dist and dist != "fixed" else ""
    if config.input_len_sweep:
        out.append(("prompt lengths", ", ".join(str(n) for n in config.input_len_sweep) + f" tokens{dist}"))
    elif config.input_len is not None:
        out.append(("prompt length", f"{config.input_len} tokens{dist}"))
    if config.output_len is not None:
        out.append(("output length", f"{config.output_len} tokens"
                    + (", end-of-sequence ignored" if config.ignore_eos_sent else "")))
    if config.shared_prefix_len:
        out.append(("shared prefix", f"{config.shared_prefix_len} tokens"))
    if config.dataset:
        out.append(("dataset", str(config.dataset)))
    return out


def _target(report: Report, config: BenchRunConfig) -> list[tuple[str, str]]:
    t = report.target
    urls = t.urls or config.urls or ()
    out = [("server", ", ".join(urls) if urls else (t.url or config.url or "n/a")),
           ("model", t.model or config.model or "n/a"),
           ("engine", engine_label(t.engine, t.engine_version))]
    endpoint = config.endpoint
    if endpoint:
        out.append(("API endpoint", {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
                    .get(endpoint, str(endpoint))))
    if config.max_model_len:
        out.append(("max model length", f"{config.max_model_len:,} tokens"))
    if config.balance:
        out.append(("balancing", str(config.balance)))
    return out


def _load(config: BenchRunConfig, section_: BenchSection) -> list[tuple[str, str]]:
    out = _levels_text(config, section_)
    if config.num_requests:
        out.append(("requests per level", f"{config.num_requests:,}"))
    if config.duration_s:
        out.append(("duration per level", f"{config.duration_s:g} s"))
    out += _lengths(config)
    kind = config.workload.kind if config.workload is not None else None
    if kind and kind != "synthetic":
        out.append(("workload", kind.replace("_", " ")))
    if config.warmup:
        out.append(("warm-up requests", str(config.warmup)))
    if (config.repeat or 1) > 1:
        out.append(("repeats", f"{config.repeat} ({config.repeat_order or 'in a row'})"))
    slo = to_dict(config.slo) if config.slo is not None else {}       # the limits given
    if slo:
        out.append(("SLO", ", ".join(f"{k} ≤ {v:g}" for k, v in slo.items())))
    if config.timeout_s:
        out.append(("request timeout", f"{config.timeout_s:g} s"))
    if config.seed is not None:
        out.append(("seed", str(config.seed)))
    if config.started_at:
        out.append(("started", str(config.started_at)))
    return out


def workload(report: Report) -> str:
    """The Workload & config section: what was measured and how, from the report's target and bench config."""
    assert report.bench is not None
    config, h = _config(report), report.host
    host = [("host", h.hostname), ("CPU", f"{h.cpu_model or 'unknown'}" + (f", {h.num_cpus} cores" if h.num_cpus else "")),
            ("GPUs", ", ".join(g.name for g in h.gpus) or "none seen"), ("command", " ".join(report.command))]
    return section("Workload & config", "<div class=cols><div><h3>Target</h3>" + kv(_target(report, config),
                   mono=("server",)) + "<h3>Host</h3>" + kv(host, mono=("command",)) + "</div><div><h3>Load</h3>"
                   + kv(_load(config, report.bench)) + "</div></div>", "workload")


def results(section_: BenchSection) -> str:
    note = "<p class=muted>Latencies in milliseconds. A level marked NO measured the client, not the server.</p>"
    return section("Results", table(COLUMNS, [row_cells(lv) for lv in section_.levels]) + note, "results")


def _finding(f: Finding) -> str:
    kind = "<span class='badge opportunity'>opportunity</span> " if f.kind is FindingKind.OPPORTUNITY else ""
    evidence = "".join(f"<tr><td><code>{esc(k)}</code></td><td>{esc(evidence_value(k, v))}</td></tr>"
                       for k, v in f.evidence.items())
    lines = ["$ " + c for c in f.fix.commands] + (["set: " + "  ".join(f.fix.flags)] if f.fix.flags else [])
    commands = f"<pre>{esc(chr(10).join(lines))}</pre>" if lines else ""
    explains = (f"<p class=muted>Explains: {esc(', '.join(f.explains))}</p>" if f.explains else "")
    refs = "".join(f"<li><code>{esc(r)}</code></li>" for r in f.references)
    return (f"<div class=finding><h3><span class='badge sev-{f.severity.value}'>{esc(f.severity.value)}</span> {kind}"
            f"<span class=code>{esc(f.code)}</span>{esc(f.title)} <span class=muted>({esc(f.certainty.value)})</span>"
            f"</h3><p>{esc(f.message)}</p>"
            + (f"<table><thead><tr><th>evidence</th><th>value</th></tr></thead><tbody>{evidence}</tbody></table>"
               if evidence else "")
            + f"<div class=fix><b>Fix:</b> {esc(f.fix.text)}{commands}</div>{explains}"
            + (f"<details><summary class=muted>References</summary><ul>{refs}</ul></details>" if refs else "")
            + "</div>")


def findings(report: Report) -> str:
    ordered = sorted(report.findings, key=lambda f: (f.kind is FindingKind.OPPORTUNITY, f.severity.rank))
    body = "".join(_finding(f) for f in ordered) or "<p>No problems found.</p>"
    errored = [r for r in report.skipped_rules if r.reason.startswith("errored")]
    if errored:
        body += bullets(f"{r.code} errored (the other rules ran): {r.reason}" for r in errored)
    return section("Findings", body, "findings")


def notes(report: Report) -> str:
    """Run notes (said in plain words) and per-level notes; empty when there are none."""
    assert report.bench is not None
    lines = list(dict.fromkeys(plain_note(str(n)) for n in _config(report).notes))
    lines += [f"{level_name(lv)}: {plain_note(n)}" for lv in report.bench.levels for n in lv.notes]
    return section("Notes", bullets(lines), "notes") if lines else ""
