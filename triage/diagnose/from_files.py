"""`triage diagnose --from FILE [--from FILE ...]`: diagnose from what was handed over, with no probe of this host.

Each file's kind is told by its content, not its name:
- a saved diagnose report or a bare snapshot (JSON): replayed (pipeline.replay);
- a `--bundle` archive (.tar.gz): its snapshot.json replayed;
- anything else that is text: a server log, read as evidence about another machine (probes/logs.py). Several
  logs are one log in the order given (a rotated log, oldest first). The engine, its version and its settings
  come from the log's own lines; this host's GPU, CPU and memory are never reported as that deployment's;
- what else a ticket carries (a /metrics dump, nvidia-smi, collect_env, a launch command, a Markdown issue body
  holding them, or a folder of them): read by triage/diagnose/from_ticket.py into one deployment.
A file triage cannot read is a one-line error (exit 2).
"""
from __future__ import annotations

import json
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from triage.core.errors import ReportError, UsageError
from triage.core.probe_data import LogsData, ServerConfigData
from triage.core.report import BenchSection, HostInfo, Report, ReportKind, Target
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot

if TYPE_CHECKING:
    from triage.diagnose.pipeline import DiagnoseResult
    from triage.rules import RulesConfig

SNIFF_BYTES = 64 * 1024
KINDS = ("report", "snapshot", "bundle", "log")


def sniff(path: Path) -> str:
    """One of KINDS, from the file's first bytes; ReportError when it is none of them."""
    try:
        with path.open("rb") as f:
            head = f.read(SNIFF_BYTES)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"{path}: a directory, not a file") from None
    except OSError as e:
        raise ReportError(f"{path}: cannot read it ({e.strerror or e})") from None
    if head[:2] == b"\x1f\x8b":
        return "bundle"
    if not head.strip():
        raise ReportError(f"{path}: the file is empty")
    if b"\x00" in head:
        raise ReportError(f"{path}: a binary file, not a triage report, snapshot, bundle or text log")
    text = head.decode("utf-8", errors="replace").lstrip()
    return _json_kind(path) if text.startswith("{") else "log"


def _json_kind(path: Path) -> str:
    """A JSON document: a report or a snapshot; a file of one JSON record per line is a log."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return "log"
    if isinstance(raw, dict) and "schema_version" in raw:
        return "report"
    if isinstance(raw, dict) and isinstance(raw.get("probes"), list):
        return "snapshot"
    raise ReportError(f"{path}: a JSON document that is neither a triage report nor a snapshot (no `probes` "
                      "list), nor a log of one JSON record per line")


def _bundle_snapshot(path: Path, into: Path) -> Path:
    """The bundle's snapshot.json, written beside nothing of the user's: into `into` (a temporary folder)."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            member = next((m for m in tar.getmembers() if m.isfile() and m.name.endswith("/snapshot.json")), None)
            if member is None:
                raise ReportError(f"{path}: a .tar.gz without a snapshot.json (not a triage bundle)")
            blob = tar.extractfile(member).read()        # type: ignore[union-attr]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ReportError(f"{path}: not a readable .tar.gz ({e})") from None
    out = into / "snapshot.json"
    out.write_bytes(blob)
    return out


def unknown_host(how: str = "diagnosed from its log", snapshot: Snapshot | None = None) -> HostInfo:
    """The deployment's host as a report names it when only its files were read: its GPUs and CPU where the
    files said (nvidia-smi, collect_env), never this host's."""
    from triage.core.probe_data import CpuData
    from triage.diagnose.pipeline import gpus_of

    cpu = snapshot.payload(CpuData) if snapshot is not None else None
    return HostInfo(hostname=f"unknown ({how})", os="unknown", python="unknown",
                    cpu_model=cpu.model if cpu else None, num_cpus=cpu.num_logical_cpus if cpu else None,
                    memory_total_bytes=None, gpus=gpus_of(snapshot) if snapshot is not None else ())


def _config_result(logs: LogsData) -> ProbeResult:
    """server_config from the log's own config line, each field's source `log`."""
    known = ServerConfigData.__dataclass_fields__
    fields = {k: v for k, v in (logs.config or {}).items() if k in known}
    if logs.engine:
        fields.setdefault("engine", logs.engine)
    if logs.engine_version:
        fields.setdefault("engine_version", logs.engine_version)
    if not fields:
        return ProbeResult("server_config", ProbeStatus.UNSUPPORTED, 0.0, "the log names no engine or setting")
    fields["sources"] = {k: "log" for k in fields if k != "sources"}
    return ProbeResult("server_config", ProbeStatus.OK, 0.0, None, ServerConfigData.build(fields))


def diagnose_logs(paths: Sequence[Path], bench: BenchSection | None, rules_config: RulesConfig | None,
                  baseline: Report | None) -> DiagnoseResult:
    from triage.core.report import new_report
    from triage.diagnose.pipeline import DiagnoseResult, Discovery, run_rules
    from triage.probes.logs import probe_logs

    logs = probe_logs([str(p) for p in paths], source="--from")
    if not logs.ok or not isinstance(logs.data, LogsData):
        raise ReportError(logs.reason or f"{paths[0]}: the log could not be read")
    config = _config_result(logs.data)
    snapshot = Snapshot(probes=(config, logs), window_s=None)
    findings, skipped = run_rules(snapshot, bench, rules_config, baseline)
    cfg = config.data if isinstance(config.data, ServerConfigData) else ServerConfigData()
    target = Target(engine=logs.data.engine, engine_version=logs.data.engine_version,
                    model=cfg.served_model_name or cfg.model)
    report = new_report(ReportKind.DIAGNOSE, unknown_host(), target, probes=snapshot.probes, findings=findings,
                        skipped_rules=skipped, bench=bench)
    names = ", ".join(str(p) for p in paths)
    return DiagnoseResult(report=report, snapshot=snapshot,
                          discovery=Discovery(url=None, engine=logs.data.engine, how="log",
                                              note=f"read from {names}; no probe of this host ran"))


def diagnose_from(paths: Sequence[Path], bench: BenchSection | None, rules_config: RulesConfig | None,
                  baseline: Report | None, workdir: Path, dumps_apart_s: float | None = None,
                  redact_hosts: bool = False) -> DiagnoseResult:
    """Replay a report, snapshot or bundle; read one or more logs; or read what a ticket carries."""
    from triage.diagnose.from_ticket import diagnose_ticket, pieces
    from triage.diagnose.pipeline import replay

    kinds = ["folder" if p.is_dir() else sniff(p) for p in paths]
    saved = [p for p, k in zip(paths, kinds, strict=True) if k not in ("log", "folder")]
    if saved and len(paths) > 1:
        raise UsageError("--from: give one saved report, snapshot or bundle alone, or the files of one deployment "
                         f"({', '.join(f'{p} is a {k}' for p, k in zip(paths, kinds, strict=True))})")
    if saved:
        source = _bundle_snapshot(saved[0], workdir) if kinds[0] == "bundle" else saved[0]
        return replay(source, bench, rules_config, baseline)
    parts = pieces(paths, redact_hosts)          # read and classified once, here
    if not redact_hosts and "folder" not in kinds and all(p.kind == "log" for p in parts):
        return diagnose_logs(paths, bench, rules_config, baseline)
    return diagnose_ticket(paths, bench, rules_config, baseline, dumps_apart_s, redact_hosts, parts)
