"""How many torch intra-op (OpenMP) threads fit this host, for timing runs.

PyTorch's default is one thread per core. An OpenMP team that large spins at every barrier until
its slowest member arrives, so when anything else wants those cores (another process, or the
Python thread feeding the ops) a member gets descheduled and each op waits a whole scheduler slice:
on the shared 2-core development box a decode-sized matmul issued from the main thread ran ~20×
slower with 2 threads than with 1. ``fit_num_threads`` leaves one core for the Python side and the
rest of the host, and no more than the cores other work leaves idle (1-minute load average).
"""
from __future__ import annotations

import os

import torch


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):     # not Linux
        return os.cpu_count() or 1


def fit_num_threads() -> tuple[int, str]:
    """(threads, why): at most torch's default, one core left free, and no more than the idle cores."""
    cores = usable_cores()
    default = torch.get_num_threads()
    try:
        busy = round(os.getloadavg()[0])
    except (AttributeError, OSError):
        busy = 0
    n = max(1, min(default, cores - 1, cores - busy))
    why = (f"{n} of {cores} usable cores (torch default {default}; 1-min load {busy}): one core is left to the "
           f"Python thread and the rest of the host, so OpenMP barriers do not wait on a descheduled thread")
    return n, why
