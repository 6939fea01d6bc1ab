"""ENG002, below roofline (rules/catalog/eng002_below_roofline.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    gpu0,
    level,
    report,
    snapshot,
)
from triage.core.report import ReportKind

CODE = "ENG002"


def cases() -> list[Case]:
    return [
        case("positive_far_below", "8B FP8 (8.5 GB) on an H100: 26 tok/s at c=1 vs a 394 tok/s roofline",
             {**FIRES, "evidence_keys": ["derived.roofline_frac", "config.model.weight_bytes"]},
             snapshot(), bench(level(0, "tpot_ms", p50=38.0)), config={"model_weight_bytes": 8.5e9}),
        case("negative_near_roofline", "8 ms TPOT (125 tok/s) with 16 GB of bf16 weights: 60% of the roofline",
             PASSES, snapshot(), bench(), config={"model_weight_bytes": 16.06e9}),
        case("positive_weights_from_plan_report", "Weight bytes from a `triage plan` report given as baseline",
             {**FIRES, "evidence_keys": ["baseline.plan.model.weight_bytes"]},
             snapshot(), bench(level(0, "tpot_ms", p50=38.0)),
             # Report.plan is the plan section's own JSON (triage/plan/section.py), a plain dict in the type too.
             baseline=report(ReportKind.PLAN, plan={"model": {"name": "llama-3.1-8b", "weight_bytes": 8.5e9}})),
        case("positive_a100_bandwidth_from_spec_table", "An A100 80GB: 2039 GB/s from the spec table",
             {**FIRES, "evidence_keys": ["derived.gpu_memory_bandwidth_gbps_spec"], "text_contains": ["(2039 GB/s spec)"]},
             snapshot(gpu0(name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0))),
             bench(level(0, "tpot_ms", p50=38.0)), config={"model_weight_bytes": 16.06e9}),
        case("skipped_gpu_not_in_spec_table", "A GPU the spec table does not know: no roofline",
             {"fires": False, "skipped_reason": "memory bandwidth is unknown"},
             snapshot(gpu0(name="NVIDIA GeForce GTX 1080")), bench(level(0, "tpot_ms", p50=38.0)),
             config={"model_weight_bytes": 8.5e9}),
        case("skipped_no_weight_bytes", "Weight bytes unknown",
             {"fires": False, "skipped_reason": "weight bytes"}, snapshot(), bench()),
    ]
