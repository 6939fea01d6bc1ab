"""`triage diagnose`: probes + rules -> ranked findings with evidence and exact flags."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import console, emit, format_option, funnel, notes
from triage.core.errors import EXIT_CANNOT, EXIT_INTERRUPTED, UsageError, require_extra
from triage.core.report import ReportKind, Severity

DEFAULT_CONFIG = "triage.toml"


def _fail_on(value: str | None) -> Severity | None:
    if value is None:
        return None
    try:
        return Severity(value.lower())
    except ValueError:
        choices = ", ".join(s.value for s in Severity)
        raise UsageError(f"--fail-on {value!r} is not a severity; use one of {choices}") from None


@funnel
def diagnose(
    url: str = typer.Option(None, "--url", envvar="TRIAGE_URL",
                            help="The server to diagnose (e.g. http://127.0.0.1:8000). Without it, triage looks "
                                 "for a vLLM, SGLang, TGI or `triage serve` process listening on this host."),
    json_path: Path = typer.Option(None, "--json", help="Also write the report JSON to this file."),
    fmt: str = format_option(ReportKind.DIAGNOSE),
    from_path: Path = typer.Option(None, "--from", help="Replay a saved diagnose report (or snapshot) offline: "
                                                        "no probe runs, the rules run again."),
    fail_on: str = typer.Option(None, "--fail-on", help="Exit 1 when a finding is at or above this severity "
                                                        "(critical, high, medium, low, info)."),
    log: Path = typer.Option(None, "--log", help="A server log to scan (preemptions, slow tokenizer, KV size, "
                                                 "NCCL errors, shared-memory stalls)."),
    kernel_log: Path = typer.Option(None, "--kernel-log", help="A saved `dmesg` to scan for Xid errors, when "
                                                               "this user cannot read the kernel log."),
    bench_path: Path = typer.Option(None, "--bench", help="A bench report whose levels the rules also judge."),
    window_s: float = typer.Option(2.0, "--window-s", envvar="TRIAGE_WINDOW_S",
                                   help="Seconds over which rates, utilization and metric deltas are measured."),
    model: str = typer.Option(None, "--model", help="The model path or hub id, when the server does not say "
                                                    "(used to time the storage read)."),
    bundle: Path = typer.Option(None, "--bundle", help="Write report, snapshot and redacted log to this .tar.gz."),
    skip: str = typer.Option(None, "--skip", help="Probes not to run, comma-separated (e.g. storage,kernel_log)."),
    no_discover: bool = typer.Option(False, "--no-discover", envvar="TRIAGE_NO_DISCOVERY",
                                     help="Without --url, do not look for a local server: host and GPU only."),
    disable: str = typer.Option(None, "--disable", help="Rule codes to turn off, comma-separated (e.g. CPU002,GPU007)."),
    config_path: Path = typer.Option(None, "--config", envvar="TRIAGE_CONFIG",
                                     help="A triage.toml with [rules] disable=[...] and [thresholds] overrides. "
                                          "Default: ./triage.toml when it exists."),
    prometheus: str = typer.Option(None, "--prometheus", envvar="TRIAGE_PROMETHEUS",
                                   help="Diagnose from the engine's metrics history in this Prometheus (its base "
                                        "URL) instead of the live server; with --window and --against."),
    window: str = typer.Option("1h", "--window", help="--prometheus: the window judged, ending at --at."),
    against: str = typer.Option("7d", "--against", help="--prometheus: compare with the same window this much "
                                                        "earlier."),
    at: str = typer.Option(None, "--at", help="--prometheus: the end of the window (Unix seconds or ISO 8601; "
                                              "default now)."),
    selector: str = typer.Option("", "--selector", help="--prometheus: label matcher for the engine's series, "
                                                        "e.g. 'instance=\"10.0.0.5:8000\"'."),
    gpu_selector: str = typer.Option("", "--gpu-selector", help="--prometheus: label matcher for dcgm-exporter's "
                                                                "GPU series, e.g. 'Hostname=\"node-3\"'."),
    active: bool = typer.Option(False, "--active",
                                help="Also measure what the host moves: host memory (per NUMA node), PCIe both "
                                     "ways, GPU memory, bf16/fp8 matmul and all-reduce bandwidth, against the "
                                     "spec. Loads the CPU and GPUs for up to ~30 s. Needs triage[engine]."),
) -> int:
    from triage.core.report_io import read_report
    from triage.diagnose import DiagnoseOptions, layer_summary, replay, unreachable_target
    from triage.diagnose import diagnose as run
    from triage.diagnose.active import ACTIVE_PROBE_NAMES, measured_rows
    from triage.diagnose.bundle import write_bundle
    from triage.rules import load_rules_config

    threshold = _fail_on(fail_on)
    if config_path is None and Path(DEFAULT_CONFIG).is_file():
        config_path = Path(DEFAULT_CONFIG)
    rules_config = load_rules_config(config_path).with_disabled((disable or "").split(","))
    for path, flag in ((log, "--log"), (kernel_log, "--kernel-log"), (bench_path, "--bench")):
        if path is not None and not path.is_file():
            raise UsageError(f"{flag} {path}: " + ("not a file" if path.exists() else "no such file"))
    bench = None
    if bench_path is not None:
        bench = read_report(bench_path).bench
        if bench is None:
            raise UsageError(f"--bench {bench_path}: not a bench report (it has no bench section)")
    if active:
        if from_path is not None:
            raise UsageError("--active measures this host now; it cannot be combined with --from")
        require_extra("engine", "triage diagnose --active (torch)")
    if prometheus is not None:
        from triage.core.durations import parse_duration_s
        from triage.diagnose.history import diagnose_history, parse_at

        if url or from_path or active or log or kernel_log or bench_path:
            raise UsageError("--prometheus reads history; it cannot be combined with --url, --from, --active, "
                             "--log, --kernel-log or --bench")
        result = diagnose_history(prometheus, parse_duration_s(window, "--window"),
                                  parse_duration_s(against, "--against"), parse_at(at), selector, gpu_selector,
                                  rules_config)
    elif from_path is not None:
        if url or log or kernel_log:
            raise UsageError("--from replays a saved snapshot; it cannot be combined with --url, --log or --kernel-log")
        result = replay(from_path, bench, rules_config)
    else:
        opts = DiagnoseOptions(url=url, window_s=window_s, log_path=str(log) if log else None,
                               kernel_log_path=str(kernel_log) if kernel_log else None, model=model,
                               discover=not no_discover,
                               skip=tuple(s.strip() for s in (skip or "").split(",") if s.strip()),
                               rules_config=rules_config, active=active)
        if active:
            from triage.diagnose.active import NOTICE
            console(stderr=True).print(NOTICE, markup=False)
        result = run(opts, bench)

    found = result.discovery
    says = notes(fmt)
    if found.how == "local process":
        says.print(f"diagnosing the {found.engine} server found on this host: pid {found.pid}, {found.url}",
                   markup=False)
    elif found.how == "--url":
        engine = result.report.target.engine or found.engine or "an unidentified server"
        says.print(f"diagnosing {found.url}" + (f" ({engine}, pid {found.pid})" if found.pid else f" ({engine})"),
                   markup=False)
    elif found.how == "prometheus":
        says.print("diagnosing from Prometheus history", markup=False)
    elif found.how == "none":
        says.print("no server to diagnose: host and GPU probes only", markup=False)
    if found.note:
        says.print(f"note: {found.note}", markup=False)
    emit(result.report, json_path, fmt)
    if fmt == "text":
        says.print("By layer:", markup=False)
        for row in layer_summary(result.report):
            says.print(f"  {row['layer']:<18} {row['verdict']:<28} ({row['probes']})", markup=False,
                       soft_wrap=True)
    if fmt == "text" and any(p.name in ACTIVE_PROBE_NAMES for p in result.report.probes):
        says.print("Measured against the spec (--active):", markup=False)
        for row in measured_rows(result.report.probes, rules_config.model_weight_bytes):
            says.print(f"  {row['measure']:<26} {row['measured']:>16}  {row['expected']:<26} {row['share']:>5}  "
                       f"{row['note']}".rstrip(), markup=False, soft_wrap=True)
    if prometheus is not None:
        from triage.diagnose.history import change_rows

        rows = change_rows(result.snapshot)
        if rows and fmt == "text":
            says.print("What changed (now vs then):", markup=False)
            for row in rows:
                says.print(f"  {row['signal']:<24} {row['now']:>12} {row['then']:>12} {row['change']:>8}", markup=False)
        history = result.snapshot.get("prometheus_history")
        if history is not None and not history.ok:
            says.print(f"triage: error: {history.reason}", markup=False)
            return EXIT_CANNOT
    if bundle is not None:
        written = write_bundle(bundle, result, str(log) if log else None)
        says.print(f"bundle written to {written}", markup=False)
    if result.interrupted:
        says.print("interrupted: the report holds what was measured before Ctrl-C", markup=False)
        return EXIT_INTERRUPTED
    unreachable = unreachable_target(result) if from_path is None else None
    if unreachable is not None:
        says.print(f"triage: error: {found.url} did not answer ({unreachable}): is the server up and the URL "
                   "right? The host checks above still stand.", markup=False)
        return EXIT_CANNOT
    if threshold is not None and any(f.severity.at_least(threshold) for f in result.report.findings):
        return 1
    return 0
