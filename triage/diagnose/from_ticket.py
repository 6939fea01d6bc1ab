"""`triage diagnose --from` on what a ticket carries: files, a folder, or one Markdown issue body holding them.

Each piece is recognised by its content (probes/artifacts: a `/metrics` dump, `nvidia-smi` in any of its three
forms, vLLM's `collect_env`, a launch command, a log) and read into the payload the live probe fills. The pieces
are one deployment: the payloads are merged (the first piece to state a field wins) and the rules run on them as
they would on a live host. The `artifacts` probe lists every piece, what it was read as and what it supplied; a
block that matches nothing is listed as unread with its first line. Nothing of the host running triage is read.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.core.errors import ReportError
from triage.core.probe_data import (
    ArtifactsData,
    CpuData,
    EngineIdentityData,
    GpuData,
    LogsData,
    ServerConfigData,
    ServerMetricsData,
    ServerProcessData,
)
from triage.core.redact import HostRedactor, redact_text
from triage.core.report import BenchSection, Certainty, Finding, Report, ReportKind, Target
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot
from triage.core.specs import match_nvml_name
from triage.engines.vllm import ENGINE as VLLM  # collect_env is vLLM's own script
from triage.probes.artifacts import blocks, classify, collect_env, metrics_dump, nvidia_smi
from triage.probes.artifacts.launch import find_command

if TYPE_CHECKING:
    from triage.diagnose.pipeline import DiagnoseResult
    from triage.rules import RulesConfig

MAX_FILE_BYTES = 32 * 1024 * 1024


@dataclass
class Piece:
    source: str
    text: str
    kind: str = ""


@dataclass
class Gathered:
    """What the pieces supplied, per probe, before the merge."""

    gpu: list[dict[str, Any]] = field(default_factory=list)
    cpu: list[dict[str, Any]] = field(default_factory=list)
    config: list[dict[str, Any]] = field(default_factory=list)
    process: list[dict[str, Any]] = field(default_factory=list)
    identity: list[dict[str, Any]] = field(default_factory=list)
    dumps: list[tuple[str, str]] = field(default_factory=list)
    logs: list[tuple[str, list[str]]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)


def _files(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
        else:
            out.append(p)
    return out


def pieces(paths: Sequence[Path], redact_hosts: bool = False) -> list[Piece]:
    """Every piece of every file (a Markdown body split into its blocks), each classified; with `redact_hosts`,
    host names and addresses are replaced before anything is read (the same host-N across the files)."""
    hosts = HostRedactor()
    out: list[Piece] = []
    for path in _files(paths):
        try:
            raw = path.read_bytes()[:MAX_FILE_BYTES]
        except OSError as e:
            raise ReportError(f"{path}: cannot read it ({e.strerror or e})") from None
        if b"\x00" in raw[:65536]:
            out.append(Piece(str(path), "", "unread"))
            continue
        text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
        text = hosts(text) if redact_hosts else text
        if blocks.is_markdown(text):
            out += [Piece(b.label(path.name, n), b.text) for n, b in enumerate(blocks.split(text), 1)]
        else:
            out.append(Piece(str(path), text))
    for p in out:
        p.kind = p.kind or (classify(p.text) if p.text.strip() else "unread")
    return out


def _read(piece: Piece, got: Gathered) -> tuple[tuple[str, ...], str | None]:
    """Read one piece into `got`: (the probes it supplies, a note)."""
    kind, text = piece.kind, piece.text
    if kind == "metrics":
        metrics_dump.read_dumps([(piece.source, text)])          # refuses a dump of no engine now, not later
        got.dumps.append((piece.source, text))
        return ("server_metrics",), None
    if kind in ("nvidia-smi-q", "nvidia-smi-xml"):
        tree = nvidia_smi.parse_q_xml(text) if kind == "nvidia-smi-xml" else nvidia_smi.parse_q_text(text)
        got.gpu.append(nvidia_smi.read_q(tree))
        return ("gpu",), "one reading: no window, so no throttle-time counters"
    if kind == "nvidia-smi":
        got.gpu.append(nvidia_smi.read_table(text))
        return ("gpu",), "the table: no clocks, PCIe link or clock-event reasons"
    if kind == "collect-env":
        env = collect_env.read(text)
        got.gpu.append(env["gpu"])
        got.cpu.append(env["cpu"])
        if env["engine_version"]:
            got.config.append({"engine": VLLM.name, "engine_version": env["engine_version"],
                               "sources": {"engine": "collect_env", "engine_version": "collect_env"}})
        if env["env"]:
            got.process.append({"debug_env": env["env"]})
        return ("gpu", "cpu", "server_config"), "the environment collect_env ran in, not necessarily the server's"
    if kind == "command":
        return _read_command(text, got)
    got.logs.append((piece.source, text.splitlines()))
    return ("logs",), None


def _read_command(text: str, got: Gathered) -> tuple[tuple[str, ...], str | None]:
    from triage.probes.server_config import probe_server_config

    cmd = find_command(text)
    if cmd is None:
        return (), None
    result = probe_server_config(None, cmd.argv, cmd.engine.name, environ=cmd.env or None)
    if isinstance(result.data, ServerConfigData):
        # What the line says and the defaults that held across releases, not a release's own default (the
        # probe takes the newest release's, and the ticket's version, from collect_env or the log, may be older).
        data = result.data.to_dict()
        said = {k for k, src in (data.get("sources") or {}).items() if src in ("cmdline", "environment", "default")}
        got.config.insert(0, {**{k: data[k] for k in said if data.get(k) is not None}, "engine": cmd.engine.name,
                              "sources": {k: data["sources"][k] for k in said}})
    proc: dict[str, Any] = {"engine": cmd.engine.name, "cmdline": list(cmd.argv)}
    if cmd.cpu_nodes:
        proc["affinity_numa_nodes"] = list(cmd.cpu_nodes)
    if cmd.mem_nodes:
        proc["memory_numa_nodes"] = list(cmd.mem_nodes)
    got.process.insert(0, proc)
    if cmd.engine.read_batching_fn is None:
        return ("server_config", "server_process"), None
    from triage.probes.batching_config import read_batching

    batching = read_batching(cmd.engine.name, cmd.argv, cmd.env)
    got.identity.append({"engine": cmd.engine.name, "evidence": ["the ticket's command line"],
                         "batching": {"slots": batching.slots, "continuous": batching.continuous,
                                      "ctx_tokens": batching.ctx_tokens, "max_queue": batching.max_queue,
                                      "evidence": list(batching.evidence), "from_cmdline": True}})
    return ("server_config", "server_process", "engine_identity"), None


def _merge(dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """One dict from several: the first to state a field wins; `sources` dicts are merged the same way."""
    out: dict[str, Any] = {}
    for d in dicts:
        for k, v in d.items():
            if k == "sources" and isinstance(v, dict):
                out["sources"] = {**v, **out.get("sources", {})}
            elif out.get(k) in (None, [], (), {}):
                out[k] = v
    return out


def _merge_gpus(readings: list[dict[str, Any]]) -> dict[str, Any]:
    """GPUs merged by index across readings; the compute capability from the product name when unstated."""
    top = _merge([{k: v for k, v in r.items() if k != "gpus"} for r in readings])
    by_index: dict[int, list[dict[str, Any]]] = {}
    for r in readings:
        for g in r.get("gpus", []):
            by_index.setdefault(int(g.get("index", 0)), []).append(g)
    gpus = []
    for index in sorted(by_index):
        g = _merge(by_index[index])
        spec = match_nvml_name(g["name"], g.get("memory_total_bytes")) if g.get("name") else None
        if spec is not None and "compute_capability" not in g:
            g["compute_capability"] = list(spec.compute_capability)
        gpus.append(g)
    top["gpus"], top["num_gpus"] = gpus, len(gpus) or top.get("num_gpus")
    return top


def _results(got: Gathered, window_s: float | None) -> tuple[list[ProbeResult], str | None]:
    results: list[ProbeResult] = []
    metrics_note = None
    if got.gpu:
        results.append(ProbeResult("gpu", ProbeStatus.OK, 0.0, "read from the ticket", GpuData.build(_merge_gpus(got.gpu))))
    if got.cpu:
        results.append(ProbeResult("cpu", ProbeStatus.OK, 0.0, "read from collect_env", CpuData.build(_merge(got.cpu))))
    if got.dumps:
        data, metrics_note = metrics_dump.read_dumps(got.dumps[-2:], window_s)
        results.append(ProbeResult("server_metrics", ProbeStatus.OK, 0.0, metrics_note, data))
    if got.logs:
        from triage.probes.logs import read_files

        logs = LogsData.build({"path": " + ".join(s for s, _ in got.logs), "truncated": False,
                               **read_files(got.logs, "--from")})
        results.append(ProbeResult("logs", ProbeStatus.OK, 0.0, None, logs))
        if logs.engine or logs.config:
            got.config.append({**{k: v for k, v in (logs.config or {}).items() if k in ServerConfigData.__dataclass_fields__},
                               "engine": logs.engine, "engine_version": logs.engine_version})
    if got.config:
        cfg = _merge(got.config)
        cfg["sources"] = {**{k: "ticket" for k in cfg if k != "sources"}, **cfg.get("sources", {})}
        results.append(ProbeResult("server_config", ProbeStatus.OK, 0.0, None, ServerConfigData.build(cfg)))
    if got.identity:
        results.append(ProbeResult("engine_identity", ProbeStatus.OK, 0.0, "read from the ticket's command line",
                                   EngineIdentityData.build(_merge(got.identity))))
    if got.process:
        results.append(ProbeResult("server_process", ProbeStatus.OK, 0.0, "read from the ticket's command line",
                                   ServerProcessData.build(_merge(got.process))))
    return results, metrics_note


_LOWER = {Certainty.CONFIRMED: Certainty.LIKELY, Certainty.LIKELY: Certainty.POSSIBLE, Certainty.POSSIBLE: Certainty.POSSIBLE}


def _weighed(finding: Finding, snapshot: Snapshot) -> Finding:
    """A finding that rests on what an artifact gives less of than the live probe says so, one certainty lower:
    counts from one /metrics scrape are totals since the server started, not a window's; the nvidia-smi table
    shows no clocks or clock-event reasons (the rules read what it does show)."""
    metrics = snapshot.payload(ServerMetricsData)
    one_scrape = metrics is not None and metrics.num_scrapes == 1
    counted = [k for k in finding.evidence if k.startswith("server_metrics.")
               and any(w in k for w in ("_delta", "per_s", "histograms", "window_s"))]
    if not (one_scrape and counted):
        return finding
    return dataclasses.replace(
        finding, certainty=_LOWER[finding.certainty],
        message=finding.message + " (From one /metrics scrape: a count since the server started, not over a "
                                  "window; send two scrapes some seconds apart to judge the rate.)")


def read_ticket(paths: Sequence[Path], window_s: float | None = None, redact_hosts: bool = False,
                parts: Sequence[Piece] | None = None) -> Snapshot:
    """The snapshot a ticket's files describe (the `artifacts` probe first)."""
    got = Gathered()
    for piece in parts if parts is not None else pieces(paths, redact_hosts):
        if piece.kind == "unread":
            first = next((ln.strip() for ln in piece.text.splitlines() if ln.strip()), "(empty or binary)")
            got.items.append({"source": piece.source, "kind": "unread", "note": redact_text(first[:120])})
            continue
        try:
            supplied, note = _read(piece, got)
        except ReportError as e:
            got.items.append({"source": piece.source, "kind": "unread", "note": str(e)})
            continue
        got.items.append({"source": piece.source, "kind": piece.kind, "supplied": list(supplied), "note": note})
    if not any(item["kind"] != "unread" for item in got.items):
        raise ReportError(f"{', '.join(map(str, paths))}: nothing in it is a log, a /metrics dump, nvidia-smi, "
                          "collect_env output or a launch command triage can read")
    results, metrics_note = _results(got, window_s)
    for item in got.items:
        if item["kind"] == "metrics" and metrics_note:
            item["note"] = metrics_note
    read = [i for i in got.items if i["kind"] != "unread"]
    unread = [i["source"] for i in got.items if i["kind"] == "unread"]
    summary = (f"{len(read)} of {len(got.items)} pieces read ({', '.join(i['kind'] for i in read)})"
               + (f"; not read: {', '.join(unread)}" if unread else ""))
    artifacts = ProbeResult("artifacts", ProbeStatus.OK, 0.0, summary, ArtifactsData.build({"items": got.items}))
    return Snapshot(probes=(artifacts, *results), window_s=window_s)


def diagnose_ticket(paths: Sequence[Path], bench: BenchSection | None, rules_config: RulesConfig | None,
                    baseline: Report | None, window_s: float | None = None,
                    redact_hosts: bool = False, parts: Sequence[Piece] | None = None) -> DiagnoseResult:
    from triage.core.report import new_report
    from triage.diagnose.from_files import unknown_host
    from triage.diagnose.pipeline import DiagnoseResult, Discovery, run_rules

    snapshot = read_ticket(paths, window_s, redact_hosts, parts)
    findings, skipped = run_rules(snapshot, bench, rules_config, baseline)
    findings = [_weighed(f, snapshot) for f in findings]
    cfg = snapshot.payload(ServerConfigData) or ServerConfigData()
    metrics = snapshot.payload(ServerMetricsData) or ServerMetricsData()
    target = Target(engine=cfg.engine or metrics.engine, engine_version=cfg.engine_version,
                    model=cfg.served_model_name or cfg.model or metrics.model_name)
    report = new_report(ReportKind.DIAGNOSE, unknown_host("diagnosed from a ticket", snapshot), target,
                        probes=snapshot.probes, findings=findings, skipped_rules=skipped, bench=bench)
    items = (snapshot.payload(ArtifactsData) or ArtifactsData()).items
    read = sum(1 for i in items if i.kind != "unread")
    return DiagnoseResult(report=report, snapshot=snapshot,
                          discovery=Discovery(url=None, engine=target.engine, how="ticket",
                                              note=f"read {read} of {len(items)} pieces of "
                                                   f"{', '.join(map(str, paths))}; no probe of this host ran"))
