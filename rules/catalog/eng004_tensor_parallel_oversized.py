"""ENG004 (tensor-parallel-oversized): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG004/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._engine_shared import weight_bytes
from triage.rules.context import Context
from triage.rules.engine_info import engine_flags
from triage.rules.registry import rule


def _peak_kv_usage(ctx: Context) -> float:
    """The highest KV cache usage seen, in diagnose's window or any bench level."""
    peaks = [ctx.seen(ServerMetricsData).kv_cache_usage_frac_max]
    if ctx.bench is not None:
        peaks += [s.kv_cache_usage_frac_max for _, s in ctx.level_server()]
    measured = [p for p in peaks if p is not None]
    if not measured:
        raise MissingInput("the peak KV cache usage was not measured")
    return max(measured)


@rule("ENG004", "tensor-parallel-oversized", Severity.MEDIUM, ("server_config", "gpu", "server_metrics|bench"), RuleDoc(
    what="Tensor parallelism is larger than the smallest power-of-two TP whose KV cache would still hold the "
         "peak observed KV demand with 20% headroom (and one max_model_len sequence).",
    why="Every TP step all-reduces after each layer: TP=2 beats TP=4 for the same model when both fit "
        "(an explainer of inference as a memory-bound problem, 'when one GPU isn't enough' and 'the deployment playbook'). Spare GPUs serve more as extra replicas.",
    example="server_config.tensor_parallel_size = 4, derived.peak_kv_tokens = 21000, "
            "derived.kv_tokens_at_tp2 = 160000",
    fix="Use the smallest TP that fits (`--tensor-parallel-size 2`) and run the other GPUs as replicas.",
    references=("an explainer of inference as a memory-bound problem, 'when one GPU isn't enough' (TP=2 is faster than TP=4)", "an explainer of inference as a memory-bound problem, 'the deployment playbook' (right-size GPU count: smallest TP that fits)"),
), thresholds=("ENG004.kv_headroom_ratio", "ENG004.overhead_bytes_per_gpu"))
def eng004(ctx: Context) -> Hit | None:
    tp = ctx.measured(ctx.need(ServerConfigData).tensor_parallel_size, "server_config.tensor_parallel_size")
    if tp <= 1:
        return None
    weight, weight_src = weight_bytes(ctx)
    util = ctx.measured(ctx.need(ServerConfigData).gpu_memory_utilization, "server_config.gpu_memory_utilization")
    max_len = ctx.measured(ctx.need(ServerConfigData).max_model_len, "server_config.max_model_len")
    totals = [g.memory_total_bytes for g in ctx.serving_gpus() if g.memory_total_bytes]
    if not totals:
        raise MissingInput("gpu.memory_total_bytes was not measured")
    capacity, _ = ctx.kv_capacity_tokens()
    peak_tokens = _peak_kv_usage(ctx) * capacity
    overhead = ctx.th("ENG004.overhead_bytes_per_gpu")
    budget = util * min(totals) - overhead

    def kv_bytes(t: int) -> float:
        return t * budget - weight

    if kv_bytes(tp) <= 0:
        raise MissingInput("the memory figures are inconsistent (no KV room at the current TP by this estimate)")
    need = max(peak_tokens * ctx.th("ENG004.kv_headroom_ratio"), max_len)
    smallest = tp
    t = tp // 2
    while t >= 1:
        tokens = capacity * kv_bytes(t) / kv_bytes(tp)
        if kv_bytes(t) > 0 and tokens >= need:
            smallest = t
        else:
            break
        t //= 2
    if smallest >= tp:
        return None
    tokens_small = capacity * kv_bytes(smallest) / kv_bytes(tp)
    cmds, note = engine_flags({"tensor_parallel_size": smallest}, ctx.engine())
    return Hit(
        title="Tensor parallelism is larger than the model needs",
        message=f"TP={tp}, but TP={smallest} would still hold about {tokens_small:.0f} KV tokens, above the peak "
                f"demand of {peak_tokens:.0f} tokens plus headroom: the extra all-reduces cost latency.",
        evidence={"server_config.tensor_parallel_size": tp, weight_src: weight,
                  "server_config.gpu_memory_utilization": util, "derived.kv_capacity_tokens": capacity,
                  "derived.peak_kv_tokens": round(peak_tokens), f"derived.kv_tokens_at_tp{smallest}": round(tokens_small)},
        certainty=Certainty.POSSIBLE, impact=0.3,
        fix=Fix(f"Serve at TP={smallest} and run the freed GPUs as replicas behind a least-pending load balancer."
                + note, cmds),
    )
