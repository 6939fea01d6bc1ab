"""The baseline's CPU memory bandwidth, from the one host implementation (probes/active/host_memory.py):
the same code as `triage diagnose --active` and the `memory` probe's copy figure. The reference engine
may not import probes, so the baseline hands this function to its microbenchmark."""
from __future__ import annotations

from triage.probes.active.host_memory import measure_host_bandwidth
from triage.reference_engine.host.microbench import BandwidthResult


def host_bandwidth(buffer_bytes: int, num_repeats: int, max_time_s: float,
                   num_threads: int | None = None) -> BandwidthResult:
    """Host copy and read bandwidth as the microbenchmark's BandwidthResult (device "cpu"). Threads:
    `num_threads`, else torch's thread count, which the baseline has fitted to this host."""
    if num_threads is None:
        import torch

        num_threads = torch.get_num_threads()
    bw = measure_host_bandwidth(buffer_bytes=buffer_bytes, num_threads=num_threads, num_repeats=num_repeats,
                                max_time_s=max_time_s)
    return BandwidthResult("cpu", bw.buffer_bytes, bw.num_repeats, bw.copy_best_bytes_per_s,
                           bw.copy_median_bytes_per_s, bw.read_best_bytes_per_s, bw.read_median_bytes_per_s,
                           method=f"{bw.method} ({bw.num_threads} threads; triage.probes.active.host_memory)")
