"""SCHED005 (cuda-graphs-disabled): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/SCHED005/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.engines import Feature
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context
from triage.rules.engine_info import DISABLING_FLAGS
from triage.rules.registry import rule


@rule("SCHED005", "cuda-graphs-disabled", Severity.MEDIUM, ("server_config",), RuleDoc(
    what="The server runs with `--enforce-eager` (SGLang `--disable-cuda-graph`, TGI `--cuda-graphs 0`): CUDA "
         "graphs are off.",
    why="Decode steps are many small kernels; without CUDA graphs each is launched from Python, and launch "
        "overhead becomes a large share of TPOT, most of all at small batch (the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM), 'Lessons Learned and Common Pitfalls').",
    example="server_config.enforce_eager = true",
    fix="Remove `--enforce-eager`. vLLM captures batch sizes 1, 2, 4, then every 8 below 256 and every 16 "
        "above (up to 512 by default), so `--max-num-seqs` needs no power of two (the Llama 2 70B code-completion write-up (214 -> 47 ms median TTFT with vLLM) says it does; the "
        "source does not).",
    references=("a team's account of taking a Llama 2 70B code-completion service from 214 ms to 47 ms median TTFT with vLLM, 'Lessons Learned and Common Pitfalls' (CUDA graph capture; set max_num_seqs to a power of 2: not supported by the "
                "source)", "claim:vllm.enforce-eager", "claim:vllm.cuda-graph-sizes", "claim:vllm.cuda-graph-max-512",
                "claim:sglang.disable-cuda-graph-deprecated", "claim:sglang.disable-decode-cuda-graph",
                "claim:sglang.cuda-graph-backend-decode", "claim:tgi.cuda-graphs-0"),
))
def sched005(ctx: Context) -> Hit | None:
    eager = ctx.measured(ctx.need(ServerConfigData).enforce_eager, "server_config.enforce_eager")
    if not eager:
        return None
    engine = ctx.engine()
    off_flag = DISABLING_FLAGS[Feature.CUDA_GRAPHS].get(engine.name or "", "--enforce-eager")
    seqs = ctx.seen(ServerConfigData).max_num_seqs
    return Hit(
        title="CUDA graphs are disabled (eager mode)",
        message="The server runs in eager mode: every decode kernel is launched from Python.",
        evidence={"server_config.enforce_eager": True, "server_config.max_num_seqs": seqs},
        certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix(f"Remove `{off_flag}` from the server's command line.", ()),
    )
