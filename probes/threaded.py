"""The probe runner: each probe in its own thread with its own timeout, timed, and scrubbed of secrets.
A probe that raises or overruns becomes a status with a reason; the runner never raises."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from triage.core.probe_data import Payload
from triage.core.redact import redact_text
from triage.core.snapshot import ProbeResult, ProbeStatus


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    name: str
    fn: Callable[[], ProbeResult]
    timeout_s: float



def run_probe(spec: ProbeSpec) -> ProbeResult:
    """Run one probe in a daemon thread; a timeout or an exception becomes a status, never a raise."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = spec.fn()
        except BaseException as e:  # a probe must never take diagnose down with it
            box["error"] = e

    start = time.perf_counter()
    thread = threading.Thread(target=target, name=f"probe-{spec.name}", daemon=True)
    thread.start()
    thread.join(spec.timeout_s)
    duration = time.perf_counter() - start
    if thread.is_alive():
        return ProbeResult(spec.name, ProbeStatus.TIMEOUT, round(duration, 3),
                           f"did not finish within {spec.timeout_s:g} s; its partial data is lost", {})
    if "error" in box:
        e = box["error"]
        return ProbeResult(spec.name, ProbeStatus.ERROR, round(duration, 3),
                           f"the probe failed: {type(e).__name__}: {scrub(str(e))}", {})
    result = box.get("result")
    if not isinstance(result, ProbeResult):
        return ProbeResult(spec.name, ProbeStatus.ERROR, round(duration, 3), "the probe returned no result", {})
    return ProbeResult(result.name, result.status, round(duration, 3),
                       scrub(result.reason) if result.reason else None, scrub_payload(result.data))


def run_probes(specs: Sequence[ProbeSpec], into: list[ProbeResult] | None = None) -> tuple[ProbeResult, ...]:
    """Run the specs concurrently, each under its own timeout; results in spec order.

    `into` collects each result as it finishes, so an interrupted caller keeps what was measured."""
    results: list[ProbeResult | None] = [None] * len(specs)
    sink = into if into is not None else []

    def one(i: int) -> None:
        results[i] = run_probe(specs[i])
        sink.append(results[i])

    threads = [threading.Thread(target=one, args=(i,), name=f"probes-{specs[i].name}", daemon=True)
               for i in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tuple(r for r in results if r is not None)


def scrub_payload(data: Any) -> Any:
    """A payload with every string scrubbed, rebuilt as the same type."""
    if isinstance(data, Payload):
        return type(data).build(scrub(data.to_dict()))
    return scrub(data)


def scrub(value: Any) -> Any:
    """Every string in probe data through the log-line redaction (quoted and flag forms too): the last
    net under argv/env redaction."""

    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value
