"""GPU015 (matmul-throughput-low): one rule, its doc and thresholds; fixtures in tests/fixtures/rules/GPU015/. Measured by
`triage diagnose --active` (matmul probe, probes/active/matmul.py)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import MatmulData, ServerConfigData
from triage.core.report import Certainty, Fix, Severity
from triage.core.roofline import DTYPE_BYTES
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.catalog._active_shared import NO_WEIGHTS, measured_gpus
from triage.rules.context import Context
from triage.rules.fmt import pct
from triage.rules.registry import rule

# The weight dtype a quantization method stores (its bytes per parameter are roofline's DTYPE_BYTES), to turn
# the served weight bytes back into parameters; no (or another) method counts as bf16.
_QUANT_DTYPE = {"fp8": "fp8", "int8": "int8", "int4": "int4", "awq": "int4", "gptq": "int4", "marlin": "int4"}


@rule("GPU015", "matmul-throughput-low", Severity.MEDIUM, ("matmul",), RuleDoc(
    what="A GPU's measured dense bf16 (or fp8) matmul TFLOP/s (`triage diagnose --active`) is below 45% of the "
         "spec-sheet dense tensor-core peak.",
    why="Prefill and large-batch decode are compute-bound: their ceiling is FLOP/s / (2 x parameters) tokens/s. "
        "Large cuBLAS matmuls reach 60-80% of the dense peak on a healthy GPU; far below means low clocks, a "
        "power cap, thermal throttling or a sick GPU.",
    example="matmul.gpus[0].bf16_tflops = 310, matmul.gpus[0].bf16_spec_tflops = 989.4 (H100 SXM)",
    fix="Check clocks, power cap and throttling (`nvidia-smi -q -d CLOCK,PERFORMANCE,POWER`); run `dcgmi diag -r 3`.",
    references=("DCGM diagnostics: targeted stress / diagnostic plugins", "the roofline model (Williams, Waterman and Patterson, 2009): prefill is compute-bound"),
), thresholds=("GPU015.min_matmul_spec_frac",))
def gpu015(ctx: Context) -> Hit | None:
    min_frac = ctx.th("GPU015.min_matmul_spec_frac")
    evidence: dict[str, Any] = {}
    lines, judged, worst = [], False, None
    for g in measured_gpus(ctx, MatmulData):
        for dt, got, spec in (("bf16", g.bf16_tflops, g.bf16_spec_tflops), ("fp8", g.fp8_tflops, g.fp8_spec_tflops)):
            if got is None or not spec:
                continue
            judged = True
            if got < min_frac * spec:
                key = f"matmul.gpus[{g.index}]"
                evidence.update({f"{key}.{dt}_tflops": got, f"{key}.{dt}_spec_tflops": spec})
                lines.append(f"GPU {g.index} runs {dt} matmuls at {got:,.0f} TFLOP/s, {pct(got / spec)} of its "
                             f"{spec:,.0f} TFLOP/s dense peak")
                if worst is None or got / spec < worst[0] / worst[1]:
                    worst = (got, spec)
    if not judged:
        raise MissingInput("no measured GPU is in the spec table (triage/core/specs.py)")
    if worst is None:
        return None
    message = "; ".join(lines) + "."
    w = ctx.weight_bytes()
    if w is not None:
        quant = str(ctx.seen(ServerConfigData).quantization or "").lower()
        params = w[0] / DTYPE_BYTES[_QUANT_DTYPE.get(quant, "bf16")]
        at_spec, at_meas = worst[1] * 1e12 / (2 * params), worst[0] * 1e12 / (2 * params)
        message += (f" For the served model (~{params / 1e9:.1f} B parameters) the prefill ceiling per GPU falls from "
                    f"{at_spec:,.0f} to {at_meas:,.0f} tokens/s; decode loses as much once the batch makes it "
                    "compute-bound.")
        evidence.update({w[1]: w[0], "derived.prefill_tokens_per_s_bound_spec": round(at_spec, 1),
                         "derived.prefill_tokens_per_s_bound_measured": round(at_meas, 1)})
    else:
        message += NO_WEIGHTS
    return Hit(
        title="GPU matmul throughput measures far below spec", message=message, evidence=evidence,
        certainty=Certainty.CONFIRMED, impact=0.5,
        fix=Fix("Look for the cause in clocks, power and throttling (GPU002, GPU003); run DCGM's diagnostic; drain "
                "the GPU if it stays slow.", ("nvidia-smi -q -d CLOCK,PERFORMANCE,POWER", "dcgmi diag -r 3")),
    )
