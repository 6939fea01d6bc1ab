"""Everything triage knows about each serving engine, one module per engine (see docs/ARCHITECTURE.md, "Adding an
engine"): how to recognise it, its knobs per version checked against the truth tables, its defaults, its log
markers, and the claims ledger that cites the engine's own source for every sentence about its behaviour.

Outside this package no code compares engine names: it asks the engine. An engine module registers its Engine
by being a file here (triage.core.registry loads them on first use).
"""
from __future__ import annotations

from triage.engines.base import BatchingKnob, Engine, Feature, Identity, Knob, NoEquivalent, Since, Spec
from triage.engines.claims import Claim, cite, claim, ledger
from triage.engines.registry import (
    GENERIC,
    assumed,
    engines,
    get,
    known_names,
    launched_by,
    names,
    normalise,
    with_flag_tables,
)

__all__ = ["GENERIC", "BatchingKnob", "Claim", "Engine", "Feature", "Identity", "Knob", "NoEquivalent", "Since", "Spec",
           "assumed", "cite", "claim", "engines", "get", "known_names", "launched_by", "ledger", "names", "normalise",
           "with_flag_tables"]
