"""NET006, weights load slow (rules/catalog/net006_weights_load_slow.py): its fixture cases. The figures are
vLLM issue 2233's (a 67B model, about 125 GiB in 16 bits, loading for 120 minutes)."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case, logs, snapshot
from tests.rule_cases._healthy import startup_log

CODE = "NET006"
GIB = 2**30


def cases() -> list[Case]:
    return [
        case("positive_two_hours", "125 GiB in 120 minutes (19 MB/s)",
             {**FIRES, "severity": "medium", "commands": ["--load-format fastsafetensors"],
              "evidence_keys": ["logs.startup.phases[weight_load].bandwidth_bytes_per_s"]},
             snapshot(logs(startup=startup_log(load=(7200.0, int(124.8 * GIB)), ready_s=7300.0)))),
        case("negative_local_nvme", "15 GiB in 9 s", PASSES,
             snapshot(logs(startup=startup_log(load=(9.0, 15 * GIB), ready_s=60.0)))),
        case("negative_slow_but_short", "1 GiB in 20 s: slow, but not long enough to matter", PASSES,
             snapshot(logs(startup=startup_log(load=(20.0, GIB), ready_s=40.0)))),
        case("skipped_no_load_line", "The log gives no weight-load bytes", {"fires": False,
             "skipped_reason": "weight-load bytes"}, snapshot()),
    ]
