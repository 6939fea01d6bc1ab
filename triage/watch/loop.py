"""The watch loop: every interval, run diagnose (probes + rules) against the server and publish the
result to the collector. A cycle that fails is counted and logged, and the loop goes on."""
from __future__ import annotations

import time
from collections.abc import Callable

from triage.diagnose import DiagnoseOptions
from triage.diagnose import diagnose as run_diagnose
from triage.watch.exporter import WatchCollector
from triage.watch.signals import cycle_families


def run_cycle(opts: DiagnoseOptions, collector: WatchCollector) -> list[str]:
    """One cycle; returns the finding codes (for the log line)."""
    started = time.perf_counter()
    result = run_diagnose(opts)
    collector.update(cycle_families(result.report, result.snapshot), time.time(), time.perf_counter() - started)
    return [f.code for f in result.report.findings]


def watch_forever(opts: DiagnoseOptions, collector: WatchCollector, interval_s: float, cycles: int | None,
                  log: Callable[[str], None], sleep: Callable[[float], None] = time.sleep) -> int:
    """Run cycles until `cycles` have run (None: until Ctrl-C). Returns the number of cycles run."""
    done = 0
    while cycles is None or done < cycles:
        started = time.monotonic()
        try:
            codes = run_cycle(opts, collector)
            log(f"cycle {done + 1}: {len(codes)} finding(s){': ' + ', '.join(codes) if codes else ''} "
                f"in {time.monotonic() - started:.1f} s")
        except Exception as e:  # noqa: BLE001 - one bad cycle must not stop a fleet's monitor
            collector.failed()
            log(f"cycle {done + 1} failed: {type(e).__name__}: {e}")
        done += 1
        if cycles is not None and done >= cycles:
            break
        sleep(max(0.0, interval_s - (time.monotonic() - started)))
    return done
