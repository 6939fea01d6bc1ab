"""ENG002 (below-roofline): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/ENG002/."""
from __future__ import annotations

from triage.core.probe_data import ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.core.roofline import decode_tokens_per_s_bound
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._engine_shared import spec_bandwidth_gbps, weight_bytes
from triage.rules.context import Context, level_label
from triage.rules.fmt import gib, pct
from triage.rules.registry import rule


@rule("ENG002", "below-roofline", Severity.MEDIUM, ("bench",), RuleDoc(
    what="Measured decode tokens/s at concurrency 1 is below 50% of the memory-bandwidth roofline for this "
         "model and GPU (tok/s <= TP x bandwidth / weight bytes).",
    why="Decode at batch 1 reads every weight once per token, so bandwidth / weight bytes is the ceiling; "
        "well-configured engines reach 60-80% of it. Far below means the engine, its config or the GPU "
        "(clocks, PCIe, contention) wastes the hardware ('Why Your LLM Inference Is Slow (And How to Fix It)', 'Wrong Inference Engine for Your Workload': 30-50% under benchmark).",
    example="bench.c1.tpot_ms.p50 = 38 (26 tok/s), derived.roofline_tokens_per_s = 209, "
            "config.model.weight_bytes = 1.6e10, derived.gpu_memory_bandwidth_gbps_spec = 3350",
    fix="Check the engine version and config (ENG005, SCHED005, GPU002, GPU004 find the usual causes); "
        "compare with `triage baseline` on the same host.",
    references=("'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29), 'Wrong Inference Engine for Your Workload' (30-50% under published benchmarks: engine config or version)",
                "the roofline model (Williams, Waterman and Patterson, 2009): decode is memory-bandwidth-bound"),
), thresholds=("ENG002.min_roofline_frac",))
def eng002(ctx: Context) -> Hit | None:
    weight, weight_src = weight_bytes(ctx)
    c1 = [lv for lv in ctx.levels() if lv.concurrency == 1 and lv.tpot_ms.p50]
    if not c1:
        raise MissingInput("no valid concurrency-1 bench level with a TPOT")
    tpot = c1[0].tpot_ms.p50
    measured = 1000.0 / tpot
    gpus = ctx.serving_gpus() if ctx.has("gpu") else []
    names = [g.name for g in gpus]
    bws = [spec_bandwidth_gbps(g) for g in gpus]
    if not bws or any(b is None for b in bws):
        raise MissingInput("the GPU's memory bandwidth is unknown (GPU not identified, or not in "
                           "triage/core/specs.py)")
    tp = ctx.seen(ServerConfigData).tensor_parallel_size or 1
    bw = min(bws) * tp
    roofline = decode_tokens_per_s_bound(batch_size=1, bandwidth_bytes_per_s=bw * 1e9, weight_bytes=weight,
                                         context_tokens=0.0, kv_bytes_per_token=0.0)
    frac = measured / roofline
    if frac >= ctx.th("ENG002.min_roofline_frac"):
        return None
    return Hit(
        title="Decode runs far below the memory-bandwidth roofline",
        message=f"At concurrency 1 decode runs at {measured:.0f} tok/s, {pct(frac)} of the {roofline:.0f} tok/s "
                f"that {tp} x {names[0]} ({min(bws):.0f} GB/s spec) allows for {gib(weight)} of weights.",
        evidence={f"{level_label(c1[0])}.tpot_ms.p50": tpot, "derived.decode_tokens_per_s": round(measured, 1),
                  weight_src: weight, "derived.gpu_memory_bandwidth_gbps_spec": min(bws),
                  "server_config.tensor_parallel_size": tp, "derived.roofline_tokens_per_s": round(roofline, 1),
                  "derived.roofline_frac": round(frac, 3)},
        certainty=Certainty.LIKELY, impact=0.6,
        fix=Fix("Look for the cause in the other findings (eager mode, throttling, PCIe, old engine); compare with "
                "`triage baseline` on this host to see what the hardware reaches.", ("triage baseline",)),
    )
