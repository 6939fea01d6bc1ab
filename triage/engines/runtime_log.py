"""What torch and NCCL write into any engine's log: CUDA out of memory, NCCL warnings, errors and timeouts.

Not an engine (it is not registered): the reader scans these forms in every log beside the engine's own. Each
form is the text as the library's source writes it, citing the ledger (ledger/runtime.json). NCCL's `INFO`
lines, its net plugin's `dlerror` among them, are not errors and match nothing here.
"""
from __future__ import annotations

from triage.engines.base import Engine, LogForm

RUNTIME = Engine(
    name="runtime", display="torch and NCCL",
    log_facts={
        # torch's caching allocator (c10/cuda/CUDACachingAllocator.cpp), the form of torch 2.1 and later (the
        # torch every tabled engine version runs on; the 2.0 form is not read).
        "oom": (LogForm(None, "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of "
                              "which %s is free.", "runtime.torch-oom-2.1",
                        ("alloc_text", "gpu", "total_text", "free_text")),
                # Its leading part, for a line a page cut short.
                LogForm(None, "CUDA out of memory. Tried to allocate %s. GPU", "runtime.torch-oom-2.1",
                        ("alloc_text",))),
        # NCCL's debug printer (src/debug.cc) tags each line with its level; torch's ProcessGroupNCCL reports a
        # collective that ran past its timeout, and an NCCL call's error with NCCL's own error string.
        "nccl_warn": (LogForm(None, "NCCL WARN %s", "runtime.nccl-warn", ("message_text",)),),
        "nccl_timeout": (LogForm(None, "Watchdog caught collective operation timeout: %s",
                                 "runtime.torch-nccl-watchdog-timeout", ("work_text",)),),
        "nccl_error": (LogForm(None, "NCCL error in: %s, %s", "runtime.torch-nccl-error",
                               ("where_text", "message_text")),),
    },
)

# NCCL's error strings (ncclGetErrorString, src/init.cc): the class of an error, and the first thing to check.
NCCL_ERROR_CLASSES: tuple[tuple[str, str, str], ...] = (
    ("unhandled system error", "system",
     "a system call failed, most often shared memory: a container needs --ipc=host or a larger --shm-size"),
    ("unhandled cuda error", "cuda",
     "a CUDA call inside NCCL failed: check the driver and the GPUs' peer-to-peer support (NCCL_P2P_DISABLE=1 "
     "as a test), and dmesg for Xid errors"),
    ("remote process exited or there was a network error", "remote",
     "another rank died or the network between them failed: read that rank's log for its first error"),
    ("internal error", "internal", "NCCL hit an internal error: upgrade NCCL (it ships with torch) and report it"),
    ("invalid usage", "usage", "the ranks called NCCL inconsistently: often a rank that started late or crashed"),
    ("invalid argument", "usage", "the ranks called NCCL inconsistently: often a rank that started late or crashed"),
)


def nccl_error_class(message: str) -> tuple[str, str]:
    """(class, what to check first) of an NCCL error message; ('other', ...) when NCCL's string is not in it."""
    low = message.lower()
    if "shared memory" in low or "/dev/shm" in low:
        return NCCL_ERROR_CLASSES[0][1], NCCL_ERROR_CLASSES[0][2]
    for text, kind, check in NCCL_ERROR_CLASSES:
        if text in low:
            return kind, check
    return "other", "read the first NCCL WARN line of every rank (NCCL_DEBUG=WARN prints them)"
