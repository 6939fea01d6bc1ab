"""`triage bench` as a library call: optionally start the embedded reference server, run the bench with the
live view, build the report (with the rules' findings), and write every output file. `session.run_bench`
builds the BenchConfig from the command's option groups and calls `execute`."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from triage.bench.extra_files import write_csv, write_html
from triage.bench.identity import identity, server_snapshot
from triage.bench.level_runner import BenchRunner, Observer
from triage.bench.records import RecordSink
from triage.bench.run_config import BenchConfig
from triage.core.errors import EXIT_CANNOT, EXIT_INTERRUPTED, EngineError, UsageError
from triage.core.redact import redact_text
from triage.core.report import BenchSection, Finding, ReportKind, SkippedRule, Target, level_name
from triage.core.snapshot import Snapshot
from triage.engines.reference import REFERENCE
from triage.rules import RulesConfig, bench_rule_codes, evaluate

# The embedded default: small enough that `make demo` finishes in well under a minute on a 2-core CPU.
EMBEDDED_MODEL = "tiny"
EMBEDDED_SERVER_ARGS = ("--max-num-seqs", "16", "--seed", "0")


@dataclass(frozen=True, slots=True)
class OutputPaths:
    json: Path | None = None
    jsonl: Path | None = None
    csv: Path | None = None
    html: Path | None = None
    # (written file, extra copy): --json/--jsonl/--csv given beside --output-dir get a copy of the
    # directory's own file, so the directory is always complete (`triage bench merge` reads it).
    copies: tuple[tuple[Path, Path], ...] = ()

    @classmethod
    def resolve(cls, output_dir: Path | None, json: Path | None, jsonl: Path | None, csv: Path | None,
                html: Path | None) -> OutputPaths:
        """--output-dir DIR always holds bench.json, requests.jsonl and levels.csv (and report.html where the
        'html' extra, matplotlib, is installed); --json, --jsonl and --csv given as well are written as copies."""
        if output_dir is None:
            return cls(json, jsonl, csv, html)
        if html is None and importlib.util.find_spec("matplotlib") is not None:
            html = output_dir / "report.html"
        own = (output_dir / "bench.json", output_dir / "requests.jsonl", output_dir / "levels.csv")
        copies = tuple((mine, asked) for mine, asked in zip(own, (json, jsonl, csv), strict=True)
                       if asked is not None and asked.resolve() != mine.resolve())
        return cls(*own, html, copies)

    def write_copies(self) -> dict[str, Path]:
        """Copy each written file to where --json/--jsonl/--csv asked; {"copy of NAME": path} of those made."""
        made = {}
        for mine, asked in self.copies:
            if mine.exists():
                shutil.copyfile(mine, asked)
                made[f"copy of {mine.name}"] = asked
        return made

    def check_writable(self) -> None:
        """Fail before the run, not after it: a bench can take many minutes, and an unwritable --json at the
        end would lose its report."""
        asked = {mine: copy for mine, copy in self.copies}
        for flag, path in (("--json", self.json), ("--jsonl", self.jsonl), ("--csv", self.csv), ("--html", self.html),
                           ("--json", asked.get(self.json)), ("--jsonl", asked.get(self.jsonl)),
                           ("--csv", asked.get(self.csv))):
            if path is None:
                continue
            if path.is_dir():
                raise UsageError(f"{flag} {path}: is a directory; give a file name")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UsageError(f"{flag} {path}: cannot create its directory ({e.strerror or e})") from None
            if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
                raise UsageError(f"{flag} {path}: not writable by this user")


@contextlib.contextmanager
def embedded_server(model: str = EMBEDDED_MODEL) -> Iterator[Any]:
    """Start the bundled reference engine on a free loopback port for the length of the block."""
    try:
        from triage.reference_engine.serve.launcher import start_reference_server
    except ImportError as e:
        raise EngineError(f"the bundled reference engine is not available ({e}); pass --url to benchmark "
                          "a running server") from None
    # Leave one core to this client: on a small host, torch's threads would otherwise starve the event loop.
    threads = max(1, (os.cpu_count() or 2) - 1)
    handle = start_reference_server(model, extra_args=EMBEDDED_SERVER_ARGS, env={"OMP_NUM_THREADS": str(threads)})
    try:
        yield handle
    finally:
        handle.stop()


def evaluate_rules(section: BenchSection, server: Snapshot | None = None) -> tuple[tuple[Finding, ...],
                                                                                   tuple[SkippedRule, ...]]:
    """The rules a bench report alone can satisfy (BENCH*, SCHED*, ...), with what the server's passive probes
    read after the run (`server`: its engine and settings). `triage diagnose --bench REPORT.json` runs every
    rule with all the probes."""
    result = evaluate(server or Snapshot(), bench=section, config=RulesConfig(enabled_only=bench_rule_codes()))
    return tuple(result.findings), tuple(result.skipped)


@dataclass(frozen=True, slots=True)
class Outcome:
    report: Any  # triage.core.report.Report
    exit_code: int
    problem: str | None = None   # why the bench could not measure (exit 2), said in one line after the report


def _run(cfg: BenchConfig, sink: RecordSink, observer: Observer | None, nvml: Any,
         find_max: Any = None, progress: Any = None) -> tuple[BenchRunner, bool]:
    if find_max is not None:
        from triage.bench.find_max_runner import FindMaxRunner

        runner: BenchRunner = FindMaxRunner(cfg, sink=sink, observer=observer, nvml=nvml, find_max=find_max,
                                            progress=progress)
    else:
        runner = BenchRunner(cfg, sink=sink, observer=observer, nvml=nvml)
    try:
        asyncio.run(runner.run())
    except KeyboardInterrupt:
        return runner, True
    return runner, False


def execute(cfg: BenchConfig, paths: OutputPaths, *, embedded: bool, live_console: Console | None = None,
            nvml: Any = None, find_max: Any = None, progress: Any = None) -> Outcome:
    """Run the bench and write the outputs. Interrupted (Ctrl-C): the levels that finished are still
    reported and written, and the exit code is 130."""
    from triage.core.report import new_report
    from triage.probes.host import host_info

    paths.check_writable()
    with contextlib.ExitStack() as stack:
        engine = None
        if embedded:
            handle = stack.enter_context(embedded_server(cfg.model or EMBEDDED_MODEL))
            cfg = dataclasses.replace(cfg, url=handle.url)
            engine = REFERENCE.name
        sink = stack.enter_context(RecordSink(paths.jsonl))
        observer = None
        if live_console is not None:
            from triage.bench.live import LiveView

            observer = stack.enter_context(LiveView(live_console))
        runner, interrupted = _run(cfg, sink, observer, nvml, find_max, progress)
        server = Snapshot() if interrupted else server_snapshot(cfg.url)   # while the server still runs
    section = runner.section()
    if interrupted:
        section = mark_interrupted(section, runner.interrupted_in, None if find_max else len(cfg.levels))
    findings, skipped = evaluate_rules(section, server)
    metrics_engine = next((lv.server.engine for lv in section.levels if lv.server and lv.server.engine), None)
    who = identity(server, engine or metrics_engine, runner.info.engine_version if runner.info else None)
    target = Target(url=redact_text(cfg.url), urls=tuple(redact_text(u) for u in cfg.urls) if len(cfg.urls) > 1 else None,
                    engine=engine or who.engine, engine_version=who.version,
                    model=runner.info.model if runner.info else cfg.model, says=who.says)
    report = new_report(ReportKind.BENCH, host_info(), target, bench=section, findings=findings,
                        skipped_rules=skipped)
    if paths.csv is not None:
        write_csv(section, paths.csv)
    if paths.html is not None:
        write_html(report, paths.html)
    if interrupted:
        return Outcome(report=report, exit_code=EXIT_INTERRUPTED)
    problem = all_failed(section)
    return Outcome(report=report, exit_code=EXIT_CANNOT if problem else 0, problem=problem)


def mark_interrupted(section: BenchSection, cut: str | None, num_levels: int | None) -> BenchSection:
    """Ctrl-C: `config.interrupted`, and `config.partial_level`, the level it cut, when that level was kept with
    the requests that finished before it (its notes say so too); a note says how far the run got. `num_levels`:
    how many the run would have had (None: a --find-max search, which has no fixed count)."""
    partial = next((lv for lv in reversed(section.levels) if cut is not None and level_name(lv) == cut), None)
    done = len(section.levels) - (partial is not None)
    done_text = f"{done} of {num_levels}" if num_levels is not None else f"{done}"
    if partial is not None:
        note = (f"interrupted during {cut}: {partial.requests.completed + partial.requests.failed} requests "
                f"finished; that level is partial ({done_text} levels finished before it)")
    else:
        note = f"interrupted: {done_text} levels finished"
    config = dataclasses.replace(section.config, interrupted=True, partial_level=cut if partial is not None else None,
                                 notes=(*section.config.notes, note))
    return dataclasses.replace(section, config=config)


def all_failed(section: BenchSection) -> str | None:
    """A level in which every request failed measured nothing: the bench could not do its job (exit 2). The
    levels where some requests failed keep exit 0 and the finding (BENCH002)."""
    dead = [lv for lv in section.levels if lv.requests.completed == 0 and lv.requests.failed > 0]
    if not dead:
        return None
    kinds = {k: v for lv in dead for k, v in lv.requests.errors_by_kind.items()}
    why = ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) or "no error kind recorded"
    return (f"every request failed at {', '.join(level_name(lv) for lv in dead)} ({why}); the report above has what "
            "was measured")
