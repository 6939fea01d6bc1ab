"""Cold-start phases: the names triage gives them, and each engine's log lines that open and close them.

An engine module lists its lines in `log_markers` under `startup.<phase>.begin` and `startup.<phase>.end`,
each as `Since(version, text)`-style steps ((version, text) pairs): the text is the format string as it stands
in the engine's source (`%.2f`, `{}` and `{name}` placeholders match any text), so the same string is what the
ledger claim cites. Pure data: no I/O.
"""
from __future__ import annotations

from triage.engines.base import Engine

# In the order a server goes through them. "process" (interpreter, imports, argument parsing before the first
# marker) is measured by `triage coldstart` from the launch, never read from a log.
PHASES = ("process", "download", "weight_load", "compile", "cuda_graph", "kv_alloc", "warmup", "api_server")

LABELS = {
    "process": "process start", "download": "weight download", "weight_load": "weight load",
    "compile": "torch.compile", "cuda_graph": "CUDA-graph capture", "kv_alloc": "memory profile / KV allocation",
    "warmup": "warm-up", "api_server": "API server up",
}


def startup_markers(engine: Engine, version: str | None = None) -> dict[tuple[str, str], tuple[str, ...]]:
    """(phase, 'begin' | 'end') -> the lines that mark it at `version` (every known form when unknown)."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for phase in PHASES:
        for edge in ("begin", "end"):
            forms = engine.log_marker(f"startup.{phase}.{edge}", version)
            if forms:
                out[(phase, edge)] = forms
    return out
