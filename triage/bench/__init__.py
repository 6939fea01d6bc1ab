"""`triage bench`: a load generator for OpenAI-compatible servers whose numbers can be trusted.

Reading order: run_config.py (what a run does) -> prompts.py (prompts) -> http.py (the load transport) ->
client.py + sse.py (one request -> one RequestRecord) -> levels.py (closed and open loops) -> stats.py (the
contract's metric definitions) -> validity.py (was the client the bottleneck?) -> server_scrape.py (server /metrics and
NVML per level) -> saturation.py -> level_runner.py (one run, level by level) -> app.py (the command's library call) ->
outputs.py / live.py. docs/BENCH.md explains the choices and the measured client overhead.
"""
from triage.bench.app import OutputPaths, execute
from triage.bench.level_runner import BenchRunner
from triage.bench.run_config import BenchConfig, Endpoint, LenDist, LevelSpec

__all__ = ["BenchConfig", "BenchRunner", "Endpoint", "LenDist", "LevelSpec", "OutputPaths", "execute"]
