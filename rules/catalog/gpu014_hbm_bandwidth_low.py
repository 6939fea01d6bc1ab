"""GPU014 (hbm-bandwidth-low): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU014/. Measured by
`triage diagnose --active` (hbm probe, probes/active/hbm.py)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import HbmData
from triage.core.report import Certainty, Fix, Severity
from triage.core.roofline import decode_tokens_per_s_bound
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._active_shared import (
    NO_WEIGHTS,
    measured_gpus,
    tensor_parallel,
)
from triage.rules.context import Context
from triage.rules.fmt import gib, pct
from triage.rules.registry import rule


@rule("GPU014", "hbm-bandwidth-low", Severity.HIGH, ("hbm",), RuleDoc(
    what="A GPU's measured device-to-device copy bandwidth (`triage diagnose --active`) is below 60% of its "
         "spec-sheet memory bandwidth.",
    why="Decode reads every weight once per step, so its ceiling is bandwidth / weight bytes: a GPU that "
        "moves 55% of its spec decodes at most 55% as fast. Healthy GPUs copy at 80-90% of spec; far below "
        "means lowered memory clocks, a power cap, throttling, or a sick GPU.",
    example="hbm.gpus[0].copy_bandwidth_gbps = 1500, hbm.gpus[0].spec_bandwidth_gbps = 3350 (H100 SXM)",
    fix="Check clocks and throttling (`nvidia-smi -q -d CLOCK,PERFORMANCE`), the power limit, application clocks "
        "(`nvidia-smi -rac`); run `dcgmi diag -r 3`; drain and RMA a GPU that stays slow.",
    references=("'How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide', 'GPU Layer' (dcgmi diag, memory bandwidth)", "the roofline model (Williams, Waterman and Patterson, 2009): decode is memory-bound",
                "DCGM diagnostics: memory bandwidth plugin"),
), thresholds=("GPU014.min_hbm_spec_frac",))
def gpu014(ctx: Context) -> Hit | None:
    min_frac = ctx.th("GPU014.min_hbm_spec_frac")
    evidence: dict[str, Any] = {}
    lines, judged, worst = [], False, None
    for g in measured_gpus(ctx, HbmData):
        bw, spec = g.copy_bandwidth_gbps, g.spec_bandwidth_gbps
        if bw is None or not spec:
            continue
        judged = True
        if bw < min_frac * spec:
            key = f"hbm.gpus[{g.index}]"
            evidence.update({f"{key}.copy_bandwidth_gbps": bw, f"{key}.spec_bandwidth_gbps": spec,
                             f"{key}.share_of_spec": round(bw / spec, 3)})
            lines.append(f"GPU {g.index} ({g.name}) copies {bw:,.0f} GB/s, {pct(bw / spec)} of its "
                         f"{spec:,.0f} GB/s spec")
            worst = (bw, spec) if worst is None or bw / spec < worst[0] / worst[1] else worst
    if not judged:
        raise MissingInput("no measured GPU is in the spec table (triage/core/specs.py), so there is nothing to "
                           "compare its bandwidth with")
    if worst is None:
        return None
    message = "; ".join(lines) + "."
    w = ctx.weight_bytes()
    if w is not None:
        tp = tensor_parallel(ctx)
        at_spec = decode_tokens_per_s_bound(1, worst[1] * 1e9 * tp, w[0], 0.0, 0.0)
        at_meas = decode_tokens_per_s_bound(1, worst[0] * 1e9 * tp, w[0], 0.0, 0.0)
        message += (f" For the served model ({gib(w[0])} of weights, TP={tp}) the batch-1 decode ceiling falls "
                    f"from {at_spec:,.0f} to {at_meas:,.0f} tokens/s ({at_spec - at_meas:,.0f} tokens/s lost).")
        evidence.update({w[1]: w[0], "derived.decode_tokens_per_s_bound_spec": round(at_spec, 1),
                         "derived.decode_tokens_per_s_bound_measured": round(at_meas, 1)})
    else:
        message += NO_WEIGHTS
    return Hit(
        title="GPU memory bandwidth measures far below spec", message=message, evidence=evidence,
        certainty=Certainty.CONFIRMED, impact=0.7,
        fix=Fix("Look for the cause in clocks, power and throttling (GPU002, GPU003); reset application clocks; "
                "run DCGM's memory diagnostic; drain the GPU if it stays slow.",
                ("nvidia-smi -q -d CLOCK,PERFORMANCE,POWER", "dcgmi diag -r 3")),
    )
