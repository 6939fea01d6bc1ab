"""KV002, preemptions (rules/catalog/kv002_preemptions.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    logs,
    metrics,
    snapshot,
)

CODE = "KV002"


def cases() -> list[Case]:
    return [
        case("positive_growing", "37 preemptions in the window",
             {**FIRES, "severity": "high", "evidence_keys": ["server_metrics.num_preemptions_delta"],
              "commands": ["--max-num-seqs 36"]},
             snapshot(metrics(num_preemptions_delta=37, preemptions_per_s=7.4, num_requests_running=48))),
        case("negative_not_growing", "Preemptions in the log's history, none during the window",
             PASSES, snapshot(logs(num_preemption_lines=500))),
    ]
