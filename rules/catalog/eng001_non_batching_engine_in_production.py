"""ENG001 (non-batching-engine-in-production): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG001/."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import ServerConfigData, ServerProcessData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engines import NON_BATCHING_ENGINES
from triage.rules.registry import rule


@rule("ENG001", "non-batching-engine-in-production", Severity.HIGH, ("server_process|server_config|bench",), RuleDoc(
    what="The endpoint is Ollama, a llama.cpp server or a bare Hugging Face `generate()` wrapper, under "
         "concurrent load (without a bench showing load, it is reported as possible).",
    why="These serve one request (or a fixed batch) at a time: the GPU idles between requests and throughput "
        "stays flat as users are added (seed 000 §7: 'Ollama for local, not production traffic').",
    example="server_process.engine = 'ollama', bench.c16.output_tokens_per_s = 48, bench.c1.output_tokens_per_s = 44",
    fix="Serve with vLLM, SGLang, TGI or TensorRT-LLM; they speak the same OpenAI API, so clients do not change.",
    references=("seed 000 §7 (wrong inference engine for the workload)", "seed 002 (naive FastAPI + generate())"),
))
def eng001(ctx: Context) -> Hit | None:
    engine = ctx.identified_engine()
    if engine.name not in NON_BATCHING_ENGINES:
        return None
    evidence: dict[str, Any] = {"server_process.engine": ctx.seen(ServerProcessData).engine or engine.name}
    loaded = []
    if ctx.bench is not None:
        loaded = [lv for lv in ctx.bench.levels if (lv.concurrency or 0) >= 2 or (lv.request_rate or 0) > 0]
        for lv in loaded:
            evidence[f"{level_label(lv)}.output_tokens_per_s"] = lv.output_tokens_per_s
    model = ctx.seen(ServerConfigData).model or "<hf-model-id-or-path>"
    return Hit(
        title=f"A non-batching engine ({engine.name}) serves this endpoint",
        message=(f"The endpoint is {engine.name}, which does not batch concurrent requests"
                 + (", and it was load-tested with concurrent requests." if loaded else
                    "; if it serves concurrent production traffic, requests wait for each other.")),
        evidence=evidence, severity=Severity.HIGH if loaded else Severity.MEDIUM,
        certainty=Certainty.CONFIRMED if loaded else Certainty.POSSIBLE, impact=0.9,
        fix=Fix("Serve the model with a continuous-batching engine; the OpenAI-compatible API stays the same.",
                (f"vllm serve {model}", f"python -m sglang.launch_server --model-path {model}")),
    )
