"""SCHED005, cuda graphs disabled (rules/catalog/sched005_cuda_graphs_disabled.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    snapshot,
)

CODE = "SCHED005"


def cases() -> list[Case]:
    return [
        case("positive_eager", "--enforce-eager with max_num_seqs 100",
             {**FIRES, "text_contains": ["Remove `--enforce-eager`"]},
             snapshot(cfg(enforce_eager=True, max_num_seqs=100))),
        case("negative_graphs_on", "CUDA graphs on", PASSES, snapshot()),
    ]
