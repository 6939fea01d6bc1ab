"""`triage bench`: a load generator for OpenAI-compatible servers whose numbers can be trusted.

Reading order: config.py (what a run does) -> workload.py (prompts) -> http.py (the load transport) ->
client.py + sse.py (one request -> one RequestRecord) -> levels.py (closed and open loops) -> stats.py (the
contract's metric definitions) -> validity.py (was the client the bottleneck?) -> server_scrape.py (server /metrics and
NVML per level) -> saturation.py -> runner.py (one run) -> app.py (the command's library call) ->
outputs.py / live.py. docs/BENCH.md explains the choices and the measured client overhead.
"""
from triage.bench.app import OutputPaths, execute
from triage.bench.config import BenchConfig, Endpoint, LenDist, LevelSpec
from triage.bench.runner import BenchRunner

__all__ = ["BenchConfig", "BenchRunner", "Endpoint", "LenDist", "LevelSpec", "OutputPaths", "execute"]
