"""How a rule case is written: the healthy snapshot and bench (_healthy.py) changed by typed edits, and
`case(...)` that holds the result.

An edit is a function from the healthy objects to changed ones, made by `dataclasses.replace` through
`replace_path`: its path and keywords are the types' real attribute names, so a renamed field fails when
the fixtures are generated (AttributeError for a path step, TypeError for a keyword) instead of silently
writing a key no rule reads. A step into a dict-typed field (cache_config, sources) is a key.

    snapshot(gpu0(utilization_gpu_pct=12.0), cfg(max_num_seqs=4), drop=("logs",))
    bench(level(2, "server", num_requests_running_mean=1.0), run_config(shared_prefix_len=0))

A nested record given as a plain dict or list (a replica, an Xid event) is typed strictly when the case is
built (`from_dict(..., strict=True)`), so a misspelt key in it fails the same way.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from tests.rule_cases._healthy import MODEL, healthy_bench, healthy_probes
from triage.core.convert import from_dict, to_dict
from triage.core.probe_data import Payload
from triage.core.report import BenchSection, HostInfo, Report, ReportKind, Target
from triage.core.snapshot import ProbeResult, ProbeStatus, Snapshot

FIRES: dict[str, Any] = {"fires": True}
PASSES: dict[str, Any] = {"fires": False}
Probes = dict[str, Payload]
Edit = Callable[[Any], Any]

_STEP = re.compile(r"([A-Za-z_]\w*)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    out: list[str | int] = []
    for part in filter(None, path.replace("[", ".[").split(".")):
        m = _STEP.fullmatch(part)
        if m is None:
            raise ValueError(f"bad path step {part!r} in {path!r}")
        out.append(m.group(1) if m.group(1) else int(m.group(2)))
    return out


def _replace(node: Any, steps: list[str | int], changes: dict[str, Any]) -> Any:
    if not steps:
        if isinstance(node, dict):
            return {**node, **changes}
        return dataclasses.replace(node, **changes)
    step, rest = steps[0], steps[1:]
    if isinstance(step, int):
        items = list(node)
        items[step] = _replace(items[step], rest, changes)
        return tuple(items)
    if isinstance(node, dict):
        return {**node, step: _replace(node[step], rest, changes)}
    return dataclasses.replace(node, **{step: _replace(getattr(node, step), rest, changes)})


def replace_path(obj: Any, path: str, **changes: Any) -> Any:
    """`obj` with the record at `path` ("gpus[0]", "histograms.ttft_s", "" for obj itself) replaced by
    `dataclasses.replace(record, **changes)` (a dict record: its keys updated)."""
    return _replace(obj, _steps(path), changes)


# --- snapshot edits ------------------------------------------------------------------------------
def edit(probe: str, path: str = "", /, **changes: Any) -> Edit:
    """Change probe `probe`'s payload at `path`."""
    def apply(probes: Probes) -> Probes:
        return {**probes, probe: replace_path(probes[probe], path, **changes)}
    return apply


def put(probe: str, payload: Payload) -> Edit:
    """Set probe `probe`'s whole payload (a probe the healthy host does not run is added last)."""
    def apply(probes: Probes) -> Probes:
        return {**probes, probe: payload}
    return apply


def gpu(**changes: Any) -> Edit:
    return edit("gpu", **changes)


def gpu0(**changes: Any) -> Edit:
    return edit("gpu", "gpus[0]", **changes)


def kernel_log(**changes: Any) -> Edit:
    return edit("kernel_log", **changes)


def cpu(**changes: Any) -> Edit:
    return edit("cpu", **changes)


def process(**changes: Any) -> Edit:
    return edit("server_process", **changes)


def memory(**changes: Any) -> Edit:
    return edit("memory", **changes)


def storage(**changes: Any) -> Edit:
    return edit("storage", **changes)


def network(**changes: Any) -> Edit:
    return edit("network", **changes)


def metrics(path: str = "", /, **changes: Any) -> Edit:
    return edit("server_metrics", path, **changes)


def cfg(path: str = "", /, **changes: Any) -> Edit:
    return edit("server_config", path, **changes)


def identity(path: str = "", /, **changes: Any) -> Edit:
    return edit("engine_identity", path, **changes)


def logs(**changes: Any) -> Edit:
    return edit("logs", **changes)


def _typed(payload: Any) -> Any:
    """The payload typed strictly all through (nested records given as dicts become records)."""
    return from_dict(type(payload), to_dict(payload), f"probe {getattr(payload, 'PROBE', '?')}", strict=True)


def snapshot(*edits: Edit, drop: tuple[str, ...] = (), status: dict[str, tuple[str, str]] | None = None,
             base: Probes | None = None) -> Snapshot:
    """The healthy snapshot (or `base`) with `edits` applied, probes in `drop` left out, and `status`
    overrides ({probe: (status, reason)}, whose data becomes empty)."""
    probes = healthy_probes() if base is None else base
    for e in edits:
        probes = e(probes)
    results = []
    for name, body in probes.items():
        if name in drop:
            continue
        st, reason = (status or {}).get(name, ("ok", None))
        results.append(ProbeResult(name=name, status=ProbeStatus(st), duration_s=0.05 if name in _PASSIVE else 1.0,
                                   reason=reason, data=_typed(body) if st == "ok" else None))
    return Snapshot(probes=tuple(results))


# The passive probes report in ~0.05 s; the active measurements (_active.py: pcie, hbm, ...) take ~1 s.
_PASSIVE = frozenset(healthy_probes()) | {"prometheus_history", "server_peers", "topology"}


# --- bench edits ---------------------------------------------------------------------------------
def level(index: int, path: str = "", /, **changes: Any) -> Edit:
    """Change bench level `index` (0 is c=1 ... 3 is c=64) at `path` ("server", "ttft_ms", "" for the level)."""
    def apply(section: BenchSection) -> BenchSection:
        return replace_path(section, f"levels[{index}].{path}", **changes)
    return apply


def levels(path: str = "", /, **changes: Any) -> Edit:
    """The same change on every level."""
    def apply(section: BenchSection) -> BenchSection:
        for i in range(len(section.levels)):
            section = level(i, path, **changes)(section)
        return section
    return apply


def run_config(**changes: Any) -> Edit:
    """Change fields of the bench report's config (BenchRunConfig)."""
    def apply(section: BenchSection) -> BenchSection:
        return dataclasses.replace(section, config=_strict(dataclasses.replace(section.config, **changes)))
    return apply


def _strict(obj: Any) -> Any:
    return from_dict(type(obj), to_dict(obj), type(obj).__name__, strict=True)


def bench(*edits: Edit, concurrencies: tuple[int, ...] = (1, 4, 16, 64)) -> BenchSection:
    section = healthy_bench(concurrencies)
    for e in edits:
        section = e(section)
    return _strict(section)


def report(kind: ReportKind, **fields: Any) -> Report:
    """An earlier report given as a baseline (`triage diagnose --baseline`), with what every report carries."""
    host = HostInfo(hostname="gpu-node-3", os="Linux", python="3.11", cpu_model=None, num_cpus=None,
                    memory_total_bytes=None)
    return Report(kind=kind, triage_version="0.4.0", created_at="2026-11-20T10:00:00Z", command=("triage", "bench"),
                  host=host, **fields)


def bench_report(section: BenchSection) -> Report:
    return report(ReportKind.BENCH, target=Target(model=MODEL), bench=section)


# --- the case ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    description: str
    expect: dict[str, Any]
    snapshot: Snapshot
    bench: BenchSection | None = None
    baseline: Report | None = None
    config: dict[str, Any] = dataclasses.field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The fixture file's JSON: description, snapshot {probes}, bench, baseline, config, expect."""
        return {"description": self.description, "snapshot": {"probes": [to_dict(p) for p in self.snapshot.probes]},
                "bench": to_dict(self.bench) if self.bench is not None else None,
                "baseline": to_dict(self.baseline) if self.baseline is not None else None,
                "config": self.config, "expect": self.expect}


def case(name: str, description: str, expect: dict[str, Any], snap: Snapshot | None = None,
         bench_: BenchSection | None = None, baseline: Report | None = None,
         config: dict[str, Any] | None = None) -> Case:
    return Case(name, description, expect, snap if snap is not None else snapshot(), bench_, baseline, config or {})
