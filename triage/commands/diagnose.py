"""`triage diagnose`: probes + rules -> ranked findings with evidence and exact flags."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.cli_support import OptionSpec, console, emit, format_option, funnel, notes, option_groups
from triage.core.report import ReportKind
from triage.diagnose.request import DiagnoseRequest
from triage.formats import get as get_format
from triage.render import ViewOptions

DIAGNOSE_OPTIONS: OptionSpec = {
    "url": (list[str], typer.Option(None, "--url", envvar="TRIAGE_URL", metavar="<url>", help="The server to diagnose (e.g. "
            "http://127.0.0.1:8000). Without it, triage looks for a vLLM, SGLang, TGI or `triage serve` process "
            "listening on this host. Give it again for the deployment's other instances (a prefill instance beside "
            "a decode one); '#prefill' or '#decode' after a URL names its role where its own metrics do not "
            "(docs/TOPOLOGIES.md).")),
    "json_path": (Path, typer.Option(None, "--json", help="Also write the report JSON to this file.")),
    "format": (str, format_option(ReportKind.DIAGNOSE)),
    "from_path": (list[Path], typer.Option(None, "--from", help="Diagnose offline from files alone, no probe of "
                  "this host: what a ticket carries (a server log, a /metrics dump, nvidia-smi or nvidia-smi -q "
                  "[-x], vLLM's collect_env output, the launch command, or a Markdown issue body holding them; "
                  "give --from again, or a folder), or a saved diagnose report, snapshot or --bundle to replay. "
                  "The kind is told by the content (docs/TICKETS.md).")),
    "dumps_apart_s": (float, typer.Option(None, "--dumps-apart-s", min=0.001, help="With two /metrics dumps in "
                      "--from whose samples carry no timestamps: the seconds between them, so rates can be judged.")),
    "redact_hosts": (bool, typer.Option(None, "--redact-hosts", help="With --from: also replace host names and "
                     "addresses (URLs, --host, IPv4, NCCL's host prefix) with host-1, host-2 ... before reading.")),
    "fail_on": (str, typer.Option(None, "--fail-on", help="Exit 1 when a finding is at or above this severity "
                "(critical, high, medium, low, info).")),
    "log": (Path, typer.Option(None, "--log", help="The server's log, read beside the live server per engine and "
            "version: start-up failures and phases, KV size, preemptions, NCCL errors (docs/LOGS.md). For a log "
            "alone, use --from.")),
    "kernel_log": (Path, typer.Option(None, "--kernel-log", help="A saved `dmesg` to scan for Xid errors, when "
                   "this user cannot read the kernel log.")),
    "bench_path": (Path, typer.Option(None, "--bench", help="A bench report whose levels the rules also judge.")),
    "baseline_path": (Path, typer.Option(None, "--baseline", help="An earlier report of this deployment: a bench "
                      "report (with --bench, ENG006 compares throughput against it) or a `triage plan` report (its "
                      "model weight bytes price the roofline rules).")),
    "window_s": (float, typer.Option(None, "--window-s", envvar="TRIAGE_WINDOW_S", help="Seconds over which rates, "
                 "utilization and metric deltas are measured.")),
    "model": (str, typer.Option(None, "--model", help="The model path or hub id, when the server does not say "
              "(used to time the storage read).")),
    "bundle": (Path, typer.Option(None, "--bundle", help="Write report, snapshot and redacted log to this .tar.gz.")),
    "skip": (str, typer.Option(None, "--skip", help="Probes not to run, comma-separated (e.g. storage,kernel_log).")),
    "no_discover": (bool, typer.Option(None, "--no-discover", envvar="TRIAGE_NO_DISCOVERY", help="Without --url, "
                    "do not look for a local server: host and GPU only.")),
    "disable": (str, typer.Option(None, "--disable", help="Rule codes to turn off, comma-separated (e.g. "
                "CPU002,GPU007).")),
    "config_path": (Path, typer.Option(None, "--config", envvar="TRIAGE_CONFIG", help="A triage.toml with [rules] "
                    "disable=[...] and [thresholds] overrides. Default: ./triage.toml when it exists.")),
    "prometheus": (str, typer.Option(None, "--prometheus", envvar="TRIAGE_PROMETHEUS", help="Diagnose from the "
                   "engine's metrics history in this Prometheus (its base URL) instead of the live server; with "
                   "--history-window and --against.")),
    "window": (str, typer.Option(None, "--history-window", "--window", help="--prometheus: the stretch of history "
               "judged, ending at --at (--window is the older name).")),
    "against": (str, typer.Option(None, "--against", help="--prometheus: compare with the same window this much "
                "earlier.")),
    "at": (str, typer.Option(None, "--at", help="--prometheus: the end of the window (Unix seconds or ISO 8601; "
           "default now).")),
    "selector": (str, typer.Option(None, "--selector", help="--prometheus: label matcher for the engine's series, "
                 "e.g. 'instance=\"10.0.0.5:8000\"'.")),
    "gpu_selector": (str, typer.Option(None, "--gpu-selector", help="--prometheus: label matcher for dcgm-exporter's "
                     "GPU series, e.g. 'Hostname=\"node-3\"'.")),
    "active": (bool, typer.Option(None, "--active", help="Also measure what the host moves: host memory (per NUMA "
               "node), PCIe both ways, GPU memory, bf16/fp8 matmul and all-reduce bandwidth, against the spec. "
               "Loads the CPU and GPUs for up to ~30 s. Needs the engine extra.")),
}


@funnel
@option_groups(req=(DiagnoseRequest, DIAGNOSE_OPTIONS))
def diagnose(req: DiagnoseRequest, verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the probe "
             "table (every probe, its status, time and note) and the layer verdicts instead of the one-line "
             "summary of what triage looked at.")) -> int:
    from triage.diagnose.bundle import write_bundle
    from triage.diagnose.notes import change_lines, discovery_lines, layer_lines, measured_lines
    from triage.diagnose.request import check_history, exit_code, run_diagnose

    run = run_diagnose(req, notice=lambda line: console(stderr=True).print(line, markup=False))
    says = notes(req.format)
    for line in discovery_lines(run.result):
        says.print(line, markup=False)
    emit(run.result.report, req.json_path, req.format, detail=ViewOptions(verbose=verbose))
    if get_format(req.format).human:
        layers = layer_lines(run.result) if verbose else []   # without --verbose: the view's "looked at" line
        for line in layers + measured_lines(run.result, run.rules_config.model_weight_bytes):
            says.print(line, markup=False, soft_wrap=True)
        for line in change_lines(run.result) if req.prometheus is not None else []:
            says.print(line, markup=False)
    if req.prometheus is not None:
        check_history(run)
    if req.bundle is not None:
        from_log = req.from_path[-1] if req.from_path and run.result.discovery.how == "log" else None
        log = req.log or from_log
        written = write_bundle(req.bundle, run.result, str(log) if log else None)
        says.print(f"bundle written to {written}", markup=False)
    if run.result.interrupted:
        says.print("interrupted: the report holds what was measured before Ctrl-C", markup=False)
    return exit_code(run, replayed=bool(req.from_path))
