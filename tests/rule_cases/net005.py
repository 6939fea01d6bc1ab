"""NET005, weights load below storage speed (rules/catalog/net005_weights_load_below_storage_speed.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    logs,
    snapshot,
    storage,
)
from tests.rule_cases._healthy import GIB, startup_log

CODE = "NET005"


def cases() -> list[Case]:
    return [
        case("positive_loader_slower_than_disk", "15.3 GiB loaded in 60 s (0.27 GB/s) from a 3.1 GB/s disk",
             {**FIRES, "evidence_keys": ["storage.read_gbps", "derived.load_to_disk_frac"],
              "commands": ["--load-format fastsafetensors"]},
             snapshot(logs(startup=startup_log(load=(60.0, int(15.3 * GIB)))), storage(read_gbps=3.1))),
        case("negative_loader_near_disk_speed", "15.3 GiB in 6.5 s (2.5 GB/s) from a 3.1 GB/s disk", PASSES,
             snapshot(logs(startup=startup_log(load=(6.5, int(15.3 * GIB)))), storage(read_gbps=3.1))),
        case("skipped_no_load_line", "The log gives no weight-load bytes",
             {"fires": False, "skipped_reason": "weight-load bytes"},
             snapshot(logs(startup=startup_log(compile_s=(25.0,))))),
    ]
