"""The probe registry: each probe module registers itself with a name, a phase, its place in the
report and a timeout; `triage diagnose` (triage/diagnose/pipeline.py) runs whatever is registered.

A new probe is its own module under probes/ that ends with

    @register("name", phase=2, order=55, timeout_s=lambda run: run.window_s + run.grace_s)
    def _run(run: ProbeRun) -> ProbeResult:
        return probe_name(run.url, run.window_s)

plus its payload type in triage/core/probe_data/ and a fixture for its source (docs/ARCHITECTURE.md).

Phases run one after the other; the probes of one phase run together, each in its own thread:
0. `network` alone (its millisecond timings must not include waits on triage's own probe threads);
1. `server_config` (quick HTTP reads and the command line: the model it names feeds `storage`);
2. the window: gpu, cpu, memory, server_process, server_metrics, kernel_log, logs, together;
3. `storage`, which reads model files.
Active probes (`diagnose --active`, probes/active/) register with `active=True`, a budget and the extra they
need; they run after every passive phase, one at a time (triage/diagnose/active_probes.py), so that they neither
disturb the window nor measure each other.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from triage.core.probe_data import Payload
from triage.core.registry import Registry
from triage.core.snapshot import ProbeResult

P = TypeVar("P", bound=Payload)


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """What a probe may know about this run: the target, the options, the window, earlier phases."""

    url: str | None = None
    pid: int | None = None
    engine: str | None = None
    argv: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    window_s: float = 2.0
    grace_s: float = 6.0                       # time a probe may take beyond its window
    proc_root: str = "/proc"
    sys_root: str = "/sys"
    nvml: Any = None
    log_path: str | None = None
    kernel_log_path: str | None = None
    model: str | None = None                   # --model: a local copy to time, when the server does not say
    bandwidth_budget_s: float = 0.8
    max_read_bytes: int = 256 * 2**20
    read_budget_s: float = 1.5
    earlier: list[ProbeResult] = field(default_factory=list)   # results of the phases already run
    peer_urls: Sequence[str] = ()              # --url given again: the deployment's other instances
    role_hint: str | None = None               # the target's role from its --url's #fragment

    def earlier_payload(self, cls: type[P]) -> P | None:
        for r in self.earlier:
            if r.name == cls.PROBE and isinstance(r.data, cls):
                return r.data
        return None


@dataclass(frozen=True, slots=True)
class ProbeEntry:
    name: str
    phase: int
    order: int                                  # place in the report's probes list
    timeout_s: Callable[[ProbeRun], float]
    run: Callable[[ProbeRun], ProbeResult]
    active: bool = False                        # loads the host or GPUs: only with --active, one at a time
    budget_s: float | None = None               # an active probe's timed budget (its timeout adds start-up)
    extra: str | None = None                    # the pip extra it needs (`engine`: torch)


# Each module of probes/ and probes/active/ registers its probe by being imported (triage.core.registry).
PROBES: Registry[ProbeEntry] = Registry("probe", lambda entry: entry.name,
                                        packages=("triage.probes", "triage.probes.active"))


def _same_probe(old: ProbeEntry, new: ProbeEntry) -> bool:
    """A module imported a second time (under another name) registers its probe again: not a clash."""
    return old.run.__module__ == new.run.__module__


def register(name: str, *, phase: int, order: int, timeout_s: Callable[[ProbeRun], float], active: bool = False,
             budget_s: float | None = None, extra: str | None = None
             ) -> Callable[[Callable[[ProbeRun], ProbeResult]], Callable[[ProbeRun], ProbeResult]]:
    def deco(fn: Callable[[ProbeRun], ProbeResult]) -> Callable[[ProbeRun], ProbeResult]:
        PROBES.add(ProbeEntry(name, phase, order, timeout_s, fn, active, budget_s, extra), same=_same_probe)
        return fn
    return deco


def probes() -> tuple[ProbeEntry, ...]:
    """Every registered passive probe, in report order."""
    return tuple(sorted((e for e in PROBES if not e.active), key=lambda e: e.order))


def active_probes() -> tuple[ProbeEntry, ...]:
    """The `diagnose --active` probes, in the order they run (and appear in the report)."""
    return tuple(sorted((e for e in PROBES if e.active), key=lambda e: e.order))


def probe_names() -> tuple[str, ...]:
    return tuple(e.name for e in probes())
