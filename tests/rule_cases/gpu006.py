"""GPU006, xid errors (rules/catalog/gpu006_xid_errors.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    kernel_log,
    snapshot,
)
from triage.core.probe_data import XidEvent

CODE = "GPU006"


def cases() -> list[Case]:
    return [
        case("positive_fell_off_bus", "Xid 79: GPU has fallen off the bus",
             {**FIRES, "severity": "critical", "certainty": "confirmed",
              "evidence_keys": ["kernel_log.xid_events.xid_79_count"]},
             snapshot(kernel_log(xid_events=(XidEvent(xid=79, pci_bus_id="0000:3B:00.0",
                                                  line="NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."),)))),
        case("positive_app_xid", "Xid 13 (application-level) is reported as possible",
             {**FIRES, "severity": "medium", "certainty": "possible"},
             snapshot(kernel_log(xid_events=(XidEvent(xid=13, pci_bus_id="0000:3B:00.0", line="NVRM: Xid 13"),)))),
        case("positive_counts_beyond_kept_events", "xid_counts has 250 Xid 48 while only the last events are kept",
             {**FIRES, "severity": "critical", "evidence_keys": ["kernel_log.xid_events.xid_48_count"]},
             snapshot(kernel_log(xid_counts={"48": 250}, num_xid_events=250,
                                 xid_events=(XidEvent(xid=48, pci_bus_id="0000:3B:00.0", meaning="DBE",
                                                      line="Xid 48"),)))),
        case("positive_old_xid_says_its_age", "An Xid 79 from 9 days ago: the message says how old it is",
             {**FIRES, "severity": "critical", "evidence_keys": ["kernel_log.newest_xid_age_s"],
              "text_contains": ["The newest is 9 days old"]},
             snapshot(kernel_log(newest_xid_age_s=9 * 86400.0, xid_events=(XidEvent(xid=79, pci_bus_id="0000:3B:00.0", age_s=9 * 86400.0,
                                                  line="[ 12.5] NVRM: Xid (PCI:0000:3b:00): 79"),)))),
        case("negative_clean_log", "No Xid lines", PASSES, snapshot()),
        case("skipped_no_dmesg", "dmesg not readable without root",
             {"fires": False, "skipped_reason": "permission_denied"},
             snapshot(status={"kernel_log": ("permission_denied",
                                             "dmesg: read kernel buffer failed: Operation not permitted")})),
    ]
