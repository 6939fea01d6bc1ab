"""`triage diagnose` as a library: find the target, run the registered probes (probes/registry.py; each
in a thread with a timeout, probes/threaded.py), make the Snapshot, run the rules, and assemble the report. Also the offline
replay (`--from`); the one-file collector (`--bundle`) is triage/diagnose/bundle.py.

Probes run in phases so the active measurements do not disturb the passive ones:
0. `network` alone: its millisecond timings would otherwise include waits on triage's own probe threads;
1. `server_config` (quick HTTP reads and the command line: the model it names feeds `storage`);
2. the window: gpu, cpu, memory, server_process, server_metrics, kernel_log, logs, together;
3. `storage`, which reads model files;
4. with --active, the active probes (triage/diagnose/active_probes.py), one at a time.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from triage.core.errors import ReportError, UsageError
from triage.core.probe_data import EngineIdentityData, GpuData, ServerConfigData, ServerMetricsData
from triage.core.redact import redact_text
from triage.core.report import BenchSection, Finding, GpuInfo, Report, ReportKind, SkippedRule, Target
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot
from triage.diagnose.active_probes import active_names, run_active
from triage.engines import GENERIC, normalise
from triage.probes.discovery import cmdline_and_env
from triage.probes.host import host_info
from triage.probes.threaded import ProbeSpec, run_probes
from triage.rules import RulesConfig, evaluate

DEFAULT_WINDOW_S = 2.0
PROBE_GRACE_S = 6.0   # time a probe may take beyond its window before it is reported as timed out
MAX_WINDOW_S = 600.0


class Interrupted(Exception):
    """Ctrl-C during the probes: carries the snapshot of what was measured, to be written anyway."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__("interrupted")
        self.snapshot = snapshot


@dataclass(frozen=True, slots=True)
class DiagnoseOptions:
    url: str | None = None
    window_s: float = DEFAULT_WINDOW_S
    log_path: str | None = None
    kernel_log_path: str | None = None
    model: str | None = None                 # a model path or hub id, when the server does not say
    discover: bool = True                    # look for a local server when no URL is given
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    nvml: Any = None                         # an NVML module (tests inject a fake); None = pynvml
    bandwidth_budget_s: float = 0.8
    max_read_bytes: int = 256 * 2**20
    read_budget_s: float = 1.5
    skip: tuple[str, ...] = ()
    active: bool = False                     # --active: also run probes/active/ (loads CPU and GPUs)
    rules_config: RulesConfig | None = None  # --disable, triage.toml thresholds
    peer_urls: tuple[str, ...] = ()          # --url given again: the deployment's other instances
    role: str | None = None                  # the target's role from its --url's #fragment (prefill|decode|both)


@dataclass(frozen=True, slots=True)
class Discovery:
    """Which server diagnose looked at, and how it found it (said in the output)."""

    url: str | None
    pid: int | None = None
    engine: str | None = None
    how: str = "none"                        # "--url" | "local process" | "none"
    note: str | None = None
    candidates: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class DiagnoseResult:
    report: Report
    snapshot: Snapshot
    discovery: Discovery
    interrupted: bool = False           # Ctrl-C during the probes: the report holds what was measured
    not_rederived: tuple[str, ...] = ()  # a replay: each saved finding it did not find again, and why


# --------------------------------------------------------------------------------------------
# Finding the target


def discover(url: str | None, look_locally: bool = True) -> Discovery:
    from triage.probes import discovery as d
    from triage.probes.http import base_url

    if url:
        base = base_url(url)
        parts = urlsplit(base)
        pid = engine = None
        note = None
        if d.is_local_host(parts.hostname):
            try:
                port = parts.port or 80
            except ValueError:
                raise UsageError(f"--url {url}: the port is not a number") from None
            found = d.process_for_port(port)
            if found is not None:
                pid, engine = found.pid, (found.engine if found.engine != "unknown" else None)
            else:
                note = f"nothing on this host that we can see listens on port {port}"
        else:
            note = "the server is on another host: process, affinity and storage probes do not apply"
        return Discovery(url=base, pid=pid, engine=engine, how="--url", note=note)
    if not look_locally:
        return Discovery(url=None, how="none", note="no --url given and local discovery is off")
    candidates = d.find_serving_processes()
    listed = tuple({"pid": c.pid, "engine": c.engine, "port": c.port} for c in candidates)
    with_port = [c for c in candidates if c.port is not None]
    if not with_port:
        note = ("no vLLM, SGLang, TGI or `triage serve` process listening on this host; "
                "pass --url to diagnose a server elsewhere")
        if candidates:
            which = ", ".join(f"{c.engine} pid {c.pid}" for c in candidates)
            note = (f"found {which}, but no listening port we can see (still starting, or in another "
                    "network namespace); pass --url")
        return Discovery(url=None, how="none", note=note, candidates=listed)
    chosen = with_port[0]
    note = None
    if len(with_port) > 1:
        others = ", ".join(f"{c.engine} pid {c.pid} port {c.port}" for c in with_port[1:])
        note = f"several servers found; diagnosing the first (others: {others}); pass --url to choose"
    return Discovery(url=f"http://127.0.0.1:{chosen.port}", pid=chosen.pid, engine=chosen.engine,
                     how="local process", note=note, candidates=listed)


# --------------------------------------------------------------------------------------------
# Collecting


def probe_names() -> tuple[str, ...]:
    """The registered probes (probes/registry.py), in report order."""
    from triage.probes.registry import probe_names as names

    return names()


def collect(opts: DiagnoseOptions, found: Discovery) -> Snapshot:
    """Run every registered probe, phase by phase (probes/registry.py), into one Snapshot; with --active,
    the active measurements after them, one at a time (triage/diagnose/active_probes.py)."""
    from triage.probes.registry import ProbeRun, probes

    if not (0 <= opts.window_s <= MAX_WINDOW_S):
        raise UsageError(f"--window-s {opts.window_s:g} is out of range; use 0 to {MAX_WINDOW_S:g} seconds")
    entries = probes()
    names = [e.name for e in entries] + (list(active_names()) if opts.active else [])
    unknown = sorted(set(opts.skip) - set(names))
    if unknown:
        raise UsageError(f"--skip {','.join(unknown)}: no such probe; the probes are {', '.join(names)}")
    wanted = [e for e in entries if e.name not in opts.skip]
    argv, env = cmdline_and_env(found.pid)
    results: list[ProbeResult] = []
    run = ProbeRun(url=found.url, pid=found.pid, engine=found.engine, argv=argv, env=env, window_s=opts.window_s,
                   grace_s=PROBE_GRACE_S, proc_root=opts.proc_root, sys_root=opts.sys_root, nvml=opts.nvml,
                   log_path=opts.log_path, kernel_log_path=opts.kernel_log_path, model=opts.model,
                   bandwidth_budget_s=opts.bandwidth_budget_s, max_read_bytes=opts.max_read_bytes,
                   read_budget_s=opts.read_budget_s, earlier=results, peer_urls=opts.peer_urls, role_hint=opts.role)
    interrupted = False
    try:
        for phase in sorted({e.phase for e in wanted}):
            specs = [ProbeSpec(e.name, (lambda e=e: e.run(run)), e.timeout_s(run)) for e in wanted if e.phase == phase]
            run_probes(specs, results)
        if opts.active:     # the active measurements, one at a time, after everything passive
            run_active([n for n in active_names() if n not in opts.skip], results, opts.sys_root)
    except KeyboardInterrupt:
        interrupted = True
        done = {r.name for r in results}
        results += [ProbeResult(e.name, ProbeStatus.ERROR, 0.0, "interrupted before it finished") for e in wanted
                    if e.name not in done]
    order = {e.name: e.order for e in entries}
    results.sort(key=lambda r: order.get(r.name, len(order)))
    snapshot = Snapshot(probes=tuple(results), window_s=opts.window_s)
    if interrupted:
        raise Interrupted(snapshot)
    return snapshot


# --------------------------------------------------------------------------------------------
# Rules and the report


def run_rules(snapshot: Snapshot, bench: BenchSection | None, config: RulesConfig | None = None,
              baseline: Report | None = None) -> tuple[tuple[Finding, ...], tuple[SkippedRule, ...]]:
    evaluation = evaluate(snapshot, bench=bench, baseline=baseline, config=config)
    return tuple(evaluation.findings), tuple(evaluation.skipped)


def gpus_of(snapshot: Snapshot) -> tuple[GpuInfo, ...]:
    data = snapshot.payload(GpuData)
    out = []
    for g in data.gpus if data is not None else ():
        if g.index is None:
            continue
        out.append(GpuInfo(index=int(g.index), name=g.name or "unknown", uuid=g.uuid,
                           memory_total_bytes=g.memory_total_bytes, driver_version=data.driver_version))
    return tuple(out)


def target_of(snapshot: Snapshot, found: Discovery) -> Target:
    cfg = snapshot.payload(ServerConfigData) or ServerConfigData()
    metrics = snapshot.payload(ServerMetricsData) or ServerMetricsData()
    ident = snapshot.payload(EngineIdentityData) or EngineIdentityData()
    engine = found.engine or cfg.engine or ident.engine
    if engine is None and metrics.engine:
        engine = normalise(metrics.engine)
    if engine is None and found.url:
        engine = GENERIC
    model = cfg.served_model_name or cfg.model or metrics.model_name
    return Target(url=redact_text(found.url) if found.url else None, engine=engine,
                  engine_version=cfg.engine_version or ident.version, model=model,
                  says=ident.says if engine == GENERIC else None)


def diagnose(opts: DiagnoseOptions, bench: BenchSection | None = None,
             baseline: Report | None = None) -> DiagnoseResult:
    from triage.core.report import new_report

    found = discover(opts.url, opts.discover)
    interrupted = False
    try:
        snapshot = collect(opts, found)
    except Interrupted as e:
        snapshot, interrupted = e.snapshot, True
    findings, skipped = run_rules(snapshot, bench, opts.rules_config, baseline)
    report = new_report(ReportKind.DIAGNOSE, host_info(gpus_of(snapshot), opts.proc_root), target_of(snapshot, found),
                        probes=snapshot.probes, findings=findings, skipped_rules=skipped, bench=bench)
    return DiagnoseResult(report=report, snapshot=snapshot, discovery=found,
                          interrupted=interrupted)


# --------------------------------------------------------------------------------------------
# Layer by layer (the order of 'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide': GPU, CPU, memory, network, configuration)

LAYERS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("GPU", ("gpu", "kernel_log", "pcie", "hbm", "matmul", "allreduce"), ("GPU",)),
    ("CPU", ("cpu", "server_process"), ("CPU",)),
    ("memory", ("memory", "host_memory"), ("MEM",)),
    ("network & storage", ("network", "storage"), ("NET",)),
    ("server & config", ("server_metrics", "server_config", "engine_identity", "logs", "prometheus_history"),
     ("KV", "SCHED", "ENG", "QUANT", "HIST")),
    ("bench", (), ("BENCH",)),
)


def unreachable_target(result: DiagnoseResult) -> str | None:
    """Why the --url target did not answer at all (no TCP connect, no /metrics, no config), or None.
    The contract's exit 2 ("an unreachable target that was required"); the report is still written."""
    if result.discovery.how != "--url":
        return None
    probes = [result.snapshot.get(n) for n in ("network", "server_metrics", "server_config")]
    probes = [p for p in probes if p is not None]
    if not probes or any(p.ok for p in probes):
        return None
    return next((p.reason for p in probes if p.reason and p.status is ProbeStatus.ERROR), None) or "no answer"


def layer_summary(report: Report) -> list[dict[str, Any]]:
    """One row per layer: what its probes managed, its findings (count, most severe), and a verdict
    that never calls a layer clean when nothing in it was measured."""
    status = {p.name: p.status.value for p in report.probes}
    rows = []
    for layer, probe_names, prefixes in LAYERS:
        names = [n for n in probe_names if n in status]
        hits = [f for f in report.findings if f.code.rstrip("0123456789") in prefixes]
        if not names and not hits:
            continue
        num_ok = sum(status[n] == ProbeStatus.OK.value for n in names)
        if hits:
            worst = min(hits, key=lambda f: f.severity.rank).severity.value
            verdict = f"{len(hits)} finding(s), worst {worst}"
        elif names and num_ok == 0:
            verdict = "not checked"
        elif num_ok < len(names):
            verdict = "no findings (partly checked)"
        else:
            verdict = "no findings"
        rows.append({
            "layer": layer,
            "probes": ", ".join(f"{n} {status[n]}" for n in names) or "-",
            "num_probes_ok": num_ok,
            "num_probes": len(names),
            "num_findings": len(hits),
            "top_severity": min(hits, key=lambda f: f.severity.rank).severity.value if hits else None,
            "verdict": verdict,
        })
    return rows


# --------------------------------------------------------------------------------------------
# Replay


def _window_of(probes: Sequence[ProbeResult]) -> float | None:
    windows = (getattr(p.data, "window_s", None) for p in probes)
    return next((w for w in windows if isinstance(w, (int, float))), None)


def load_snapshot(path: str | os.PathLike[str]) -> tuple[Snapshot, Report | None]:
    """A snapshot from a diagnose report (or a bare {"probes": [...]} file) for offline replay."""
    from triage.core.report_io import from_dict, read_report

    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{p}: cannot read it ({e})") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{p}: not valid JSON ({e.msg} at line {e.lineno})") from None
    if isinstance(raw, dict) and "schema_version" in raw:
        report = read_report(p)
        if not report.probes:
            raise ReportError(f"{p}: a {report.kind.value} report with no probes; pass a diagnose report")
        return Snapshot(probes=report.probes, window_s=_window_of(report.probes)), report
    if isinstance(raw, dict) and isinstance(raw.get("probes"), list):
        probes = tuple(from_dict(ProbeResult, item, f"{p}.probes[{i}]") for i, item in enumerate(raw["probes"]))
        return Snapshot(probes=probes, window_s=raw.get("window_s") or _window_of(probes)), None
    raise ReportError(f"{p}: neither a triage report nor a snapshot (no `probes` list)")


def replay(path: str | os.PathLike[str], bench: BenchSection | None = None,
           rules_config: RulesConfig | None = None, baseline: Report | None = None) -> DiagnoseResult:
    from triage.core.report import new_report

    snapshot, old = load_snapshot(path)
    if bench is None and old is not None:
        bench = old.bench                 # the bench the saved diagnosis judged, unless --bench gives another
    findings, skipped = run_rules(snapshot, bench, rules_config, baseline)
    host = old.host if old is not None else host_info(gpus_of(snapshot))
    target = old.target if old is not None else Target()
    report = new_report(ReportKind.DIAGNOSE, host, target, probes=snapshot.probes, findings=findings,
                        skipped_rules=skipped, bench=bench)
    found = Discovery(url=target.url, engine=target.engine, how="replay", note=f"replayed from {path}")
    return DiagnoseResult(report=report, snapshot=snapshot, discovery=found,
                          not_rederived=_not_rederived(old, report, rules_config))


def _not_rederived(old: Report | None, new: Report, rules_config: RulesConfig | None) -> tuple[str, ...]:
    """Each finding of the saved report that the replay did not find again, with why."""
    if old is None:
        return ()
    found = {f.code for f in new.findings}
    skipped = {s.code: s.reason for s in new.skipped_rules}
    out = []
    for f in old.findings:
        if f.code in found:
            continue
        off = rules_config is not None and not rules_config.is_enabled(f.code)
        why = "turned off (--disable or triage.toml)" if off else skipped.get(f.code) or (f"the rules of this triage ({new.triage_version}) do not find it in the "
                                      f"saved probes (saved by triage {old.triage_version})")
        out.append(f"{f.code} {f.name}: {why}")
    return tuple(out)
