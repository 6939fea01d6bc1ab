"""Writes the rule fixtures tests/fixtures/rules/<CODE>/*.json from the cases in tests/rule_cases/ (one
module per rule code, built from the typed probe and bench payloads), and reads one back.

Regenerate after editing a case:  python -m tests.rules_fixtures
Each fixture file holds: description, snapshot {probes: [...]}, bench, baseline, config, expect.
expect: {"fires": bool, "severity", "certainty", "evidence_keys": [...], "commands": [...],
         "text_contains": [...], "skipped_reason": "..."}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.rule_cases import all_cases

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rules"
CASES = all_cases()


def write_all(root: Path = FIXTURES) -> int:
    """Write every case; remove stale fixture files. Returns the number written."""
    wanted = {}
    for code, name, body in CASES:
        wanted[root / code / f"{name}.json"] = json.dumps(body, indent=1, sort_keys=True) + "\n"
    for old in root.glob("*/*.json"):
        if old not in wanted:
            old.unlink()
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return len(wanted)


def load_case(path: Path):
    """(snapshot, bench, baseline, config, expect) from one fixture file."""
    from triage.core.report import BenchSection, Report
    from triage.core.report_io import from_dict
    from triage.core.snapshot import ProbeResult, Snapshot
    from triage.rules import RulesConfig

    body = json.loads(path.read_text(encoding="utf-8"))
    snap = Snapshot(probes=tuple(from_dict(ProbeResult, p, "probe") for p in body["snapshot"]["probes"]))
    bench_section = from_dict(BenchSection, body["bench"], "bench") if body.get("bench") else None
    baseline = from_dict(Report, body["baseline"], "baseline") if body.get("baseline") else None
    cfg = body.get("config") or {}
    config = RulesConfig(enabled_only=frozenset({path.parent.name}), thresholds=cfg.get("thresholds", {}),
                         target_engine=cfg.get("target_engine"), model_weight_bytes=cfg.get("model_weight_bytes"))
    return snap, bench_section, baseline, config, body["expect"]


if __name__ == "__main__":
    n = write_all()
    sys.stdout.write(f"wrote {n} fixtures under {FIXTURES}\n")
