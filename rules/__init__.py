"""The rules engine: the symptom -> fix catalog as coded rules. Pure: no I/O, no pynvml/httpx/psutil.

    from triage.rules import evaluate, REGISTRY, RulesConfig, load_rules_config
    result = evaluate(snapshot, bench=None, baseline=None, config=RulesConfig())
    result.findings   # tuple[Finding], most severe first
    result.skipped    # tuple[SkippedRule], each with the reason its inputs were missing

Inside `triage bench` (no probes): evaluate(Snapshot(), bench=section,
config=RulesConfig(enabled_only=bench_rule_codes())).

Reading order: rules/base.py (what a rule is) -> rules/context.py (how it reads inputs) -> one rule in
rules/catalog/ (one file per rule) -> rules/evaluate.py (ranking and causal chains). Thresholds: rules/thresholds.py.
"""
from __future__ import annotations

if __name__ != "triage.rules":  # one package, one import name: `rules` from the repository root is a second copy
    raise ImportError(f"import triage.rules, not {__name__}: this folder installs as triage.rules, and a second "
                      "name would load a second copy (a second registry)")

from triage.rules.base import Hit, MissingInput, Rule, RuleDoc
from triage.rules.evaluate import CAUSES, Evaluation, bench_rule_codes, evaluate
from triage.rules.registry import REGISTRY, rule
from triage.rules.rules_config import RulesConfig
from triage.rules.thresholds import THRESHOLDS
from triage.rules.triage_toml import load_rules_config

__all__ = ["CAUSES", "REGISTRY", "THRESHOLDS", "Evaluation", "Hit", "MissingInput", "Rule", "RuleDoc",
           "RulesConfig", "bench_rule_codes", "evaluate", "load_rules_config", "rule"]
