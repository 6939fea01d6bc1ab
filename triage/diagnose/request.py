"""`triage diagnose` as one call: the command line's options (DiagnoseRequest) checked against each other,
then a live diagnosis, a replay of a saved report (--from) or a diagnosis from Prometheus history."""
from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triage.core.errors import EXIT_GATE, EXIT_INTERRUPTED, EXIT_OK, TriageError, UsageError
from triage.core.report import BenchSection, Report, ReportKind, Severity

if TYPE_CHECKING:
    from triage.diagnose.pipeline import DiagnoseResult
    from triage.rules import RulesConfig

DEFAULT_CONFIG = "triage.toml"


@dataclass(frozen=True)
class DiagnoseRequest:
    """The command line's options, as given (in --help's order)."""
    url: tuple[str, ...] = ()             # the target, then the deployment's other instances (docs/TOPOLOGIES.md)
    json_path: Path | None = None
    format: str = "text"
    from_path: tuple[Path, ...] = ()     # --from, given once or more
    dumps_apart_s: float | None = None   # --from with two /metrics dumps: the seconds between them
    redact_hosts: bool = False           # --from: host names and addresses replaced before reading
    fail_on: str | None = None
    log: Path | None = None
    kernel_log: Path | None = None
    bench_path: Path | None = None
    baseline_path: Path | None = None
    window_s: float = 2.0
    model: str | None = None
    bundle: Path | None = None
    skip: str | None = None
    no_discover: bool = False
    disable: str | None = None
    config_path: Path | None = None
    prometheus: str | None = None
    window: str = "1h"
    against: str = "7d"
    at: str | None = None
    selector: str = ""
    gpu_selector: str = ""
    active: bool = False


@dataclass(frozen=True)
class DiagnoseRun:
    result: DiagnoseResult
    rules_config: RulesConfig
    threshold: Severity | None


class DiagnoseFailed(TriageError):
    """The diagnosis ran, and its report stands, but it could not do the job (exit 2)."""


def _fail_on(value: str | None) -> Severity | None:
    if value is None:
        return None
    try:
        return Severity(value.lower())
    except ValueError:
        choices = ", ".join(s.value for s in Severity)
        raise UsageError(f"--fail-on {value!r} is not a severity; use one of {choices}") from None


def _rules_config(req: DiagnoseRequest) -> RulesConfig:
    from triage.rules import load_rules_config

    config_path = req.config_path
    if config_path is None and Path(DEFAULT_CONFIG).is_file():
        config_path = Path(DEFAULT_CONFIG)
    return load_rules_config(config_path).with_disabled((req.disable or "").split(","))


def _bench(req: DiagnoseRequest) -> Report | None:
    """The input files exist; --bench's report read: a bench report, with its bench section."""
    from triage.core.report_io import read_report
    from triage.diagnose.provenance import check_kind

    for path, flag in ((req.log, "--log"), (req.kernel_log, "--kernel-log"), (req.bench_path, "--bench")):
        if path is not None and not path.is_file():
            raise UsageError(f"{flag} {path}: " + ("not a file" if path.exists() else "no such file"))
    if req.bench_path is None:
        return None
    report = check_kind(read_report(req.bench_path), "--bench", req.bench_path, (ReportKind.BENCH,))
    if report.bench is None:
        raise UsageError(f"--bench {req.bench_path}: a bench report with no bench section (no level ran)")
    return report


def _baseline(req: DiagnoseRequest) -> Report | None:
    """--baseline's earlier report: a bench report (ENG006 compares throughput with it) or a `triage plan`
    report (its model weight bytes price the roofline rules)."""
    from triage.core.report_io import read_report
    from triage.diagnose.provenance import check_kind

    if req.baseline_path is None:
        return None
    if not req.baseline_path.is_file():
        raise UsageError(f"--baseline {req.baseline_path}: " + ("not a file" if req.baseline_path.exists()
                                                               else "no such file"))
    return check_kind(read_report(req.baseline_path), "--baseline", req.baseline_path,
                      (ReportKind.BENCH, ReportKind.PLAN))


def _of_this_server(result: DiagnoseResult, bench: Report | None, baseline: Report | None) -> DiagnoseResult:
    """Findings resting on a bench or baseline of another server say so, one step down to "possible"."""
    import dataclasses

    from triage.diagnose.provenance import weigh

    report = result.report
    findings = weigh(report.findings, bench, report.target, "bench", "bench report")
    if baseline is not None and baseline.kind is ReportKind.BENCH:
        findings = weigh(findings, baseline, report.target, "baseline", "baseline report")
    return dataclasses.replace(result, report=dataclasses.replace(report, findings=findings))


def _from_history(req: DiagnoseRequest, rules_config: RulesConfig) -> DiagnoseResult:
    from triage.core.durations import parse_duration_s
    from triage.diagnose.from_prometheus import diagnose_history, parse_at

    if req.url or req.from_path or req.active or req.log or req.kernel_log or req.bench_path:
        raise UsageError("--prometheus reads history; it cannot be combined with --url, --from, --active, "
                         "--log, --kernel-log or --bench")
    assert req.prometheus is not None
    return diagnose_history(req.prometheus, parse_duration_s(req.window, "--history-window"),
                            parse_duration_s(req.against, "--against"), parse_at(req.at), req.selector,
                            req.gpu_selector, rules_config)


def _live(req: DiagnoseRequest, bench: BenchSection | None, baseline: Report | None, rules_config: RulesConfig,
          notice: Callable[[str], None]) -> DiagnoseResult:
    from triage.diagnose.pipeline import DiagnoseOptions, diagnose
    from triage.diagnose.targets import split_urls

    url, role, peers = split_urls(req.url)
    opts = DiagnoseOptions(url=url, role=role, peer_urls=peers, window_s=req.window_s, log_path=str(req.log) if req.log else None,
                           kernel_log_path=str(req.kernel_log) if req.kernel_log else None, model=req.model,
                           discover=not req.no_discover,
                           skip=tuple(s.strip() for s in (req.skip or "").split(",") if s.strip()),
                           rules_config=rules_config, active=req.active)
    if req.active:
        from triage.diagnose.active_probes import notice as active_notice
        notice(active_notice())
    return diagnose(opts, bench, baseline)


def run_diagnose(req: DiagnoseRequest, notice: Callable[[str], None]) -> DiagnoseRun:
    """Check the options and diagnose; `notice` gets a line to show before a long measurement (--active)."""
    from triage.core.errors import require_extra
    from triage.diagnose.from_files import diagnose_from

    threshold = _fail_on(req.fail_on)
    rules_config = _rules_config(req)
    bench_report = _bench(req)
    bench = bench_report.bench if bench_report is not None else None
    baseline = _baseline(req)
    if req.active:
        if req.from_path:
            raise UsageError("--active measures this host now; it cannot be combined with --from")
        require_extra("engine", "triage diagnose --active (torch)")
    if req.prometheus is not None:
        result = _from_history(req, rules_config)
    elif req.from_path:
        if req.url or req.log or req.kernel_log:
            raise UsageError("--from diagnoses from files alone (a saved report, snapshot or bundle, or what a ticket "
                             "carries); it cannot be combined with --url, --log or --kernel-log")
        with tempfile.TemporaryDirectory(prefix="triage-from-") as workdir:
            result = diagnose_from(req.from_path, bench, rules_config, baseline, Path(workdir),
                                   req.dumps_apart_s, req.redact_hosts)
    else:
        result = _live(req, bench, baseline, rules_config, notice)
    return DiagnoseRun(_of_this_server(result, bench_report, baseline), rules_config, threshold)


def check_history(run: DiagnoseRun) -> None:
    """--prometheus: a history that could not be read is an error (the report above still stands)."""
    history = run.result.snapshot.get("prometheus_history")
    if history is not None and not history.ok:
        raise DiagnoseFailed(history.reason or "")


def exit_code(run: DiagnoseRun, replayed: bool) -> int:
    """130 interrupted; an error when the --url target never answered; 1 on a finding at or above --fail-on."""
    from triage.diagnose.pipeline import unreachable_target
    from triage.diagnose.provenance import not_inference_server

    if run.result.interrupted:
        return EXIT_INTERRUPTED
    unreachable = unreachable_target(run.result) if not replayed else None
    if unreachable is not None:
        raise DiagnoseFailed(f"{run.result.discovery.url} did not answer ({unreachable}): is the server up and "
                             "the URL right? The host checks above still stand.")
    wrong = not_inference_server(run.result.snapshot, run.result.discovery.url) if not replayed else None
    if wrong is not None:
        raise DiagnoseFailed(f"{wrong}. The host checks above still stand.")
    if run.threshold is not None and any(f.severity.at_least(run.threshold) for f in run.result.report.findings):
        return EXIT_GATE
    return EXIT_OK

