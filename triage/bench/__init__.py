"""`triage bench`: a load generator for OpenAI-compatible servers whose numbers can be trusted.

Reading order: run_config.py (what a run does) -> prompts.py (prompts) -> http.py (the load transport) ->
client.py + sse.py (one request -> one RequestRecord) -> levels.py (closed and open loops) -> stats.py (the
contract's metric definitions) -> validity.py (was the client the bottleneck?) -> server_scrape.py (server /metrics and
NVML per level) -> saturation.py -> level_runner.py (one run, level by level) -> app.py (the command's library call) ->
outputs.py / live.py. docs/BENCH.md explains the choices and the measured client overhead.
"""
import importlib
from typing import Any

# Loaded on first use, so that `triage --help` and the command's option types do not import the load generator.
_EXPORTS = {"OutputPaths": "triage.bench.app", "execute": "triage.bench.app", "BenchRunner": "triage.bench.level_runner",
            "BenchConfig": "triage.bench.run_config", "Endpoint": "triage.bench.run_config",
            "LenDist": "triage.bench.run_config", "LevelSpec": "triage.bench.run_config"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'triage.bench' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
