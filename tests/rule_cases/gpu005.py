"""GPU005, memory errors (rules/catalog/gpu005_memory_errors.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    gpu0,
    snapshot,
)

CODE = "GPU005"


def cases() -> list[Case]:
    return [
        case("positive_uncorrectable", "Uncorrectable ECC errors and a pending row remap",
             {**FIRES, "severity": "critical", "commands": ["sudo nvidia-smi -r -i 0"]},
             snapshot(gpu0(ecc_uncorrected_volatile=4, remapped_rows_pending=True))),
        case("positive_retired_pages", "Retired pages past DCGM's line on a V100-era GPU",
             {**FIRES, "severity": "high"},
             snapshot(gpu0(retired_pages_sbe=50, retired_pages_dbe=16, remapped_rows_pending=None,
                           remapped_rows_failure=None))),
        case("negative_corrected_only", "Corrected ECC errors only (ECC doing its job)",
             PASSES, snapshot(gpu0(ecc_corrected_volatile=12))),
        case("skipped_no_counters", "Consumer GPU without ECC or remapping counters",
             {"fires": False, "skipped_reason": "ECC"},
             snapshot(gpu0(**dict.fromkeys(("ecc_uncorrected_volatile", "retired_pages_sbe", "retired_pages_dbe",
                                             "retired_pages_pending", "remapped_rows_pending",
                                             "remapped_rows_failure"))))),
    ]
