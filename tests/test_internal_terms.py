"""User-facing text never cites documents the user does not have.

The design notes number the source articles (000-004) and the work items (issues); a user has neither.
Rule docs, threshold sources, docs/, README.md, CONTRIBUTING.md and the example reports cite an article
by its title, or better the primary source it relies on (an engine's docs or code, a paper).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from triage.rules import REGISTRY, THRESHOLDS
from triage.rules.base import DOC_SECTIONS

REPO = Path(__file__).resolve().parent.parent
INTERNAL = [re.compile(p) for p in (r"seed 0\d\d", r"\b00[0-4] §", r"§\s?\d", r"\bissue \d+", r"Before issue")]
DOC_FILES = sorted({*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"})
EXAMPLES = sorted((REPO / "reports" / "examples").glob("*.json"))


def internal_terms(text: str) -> list[str]:
    return [m.group(0) for pat in INTERNAL for m in pat.finditer(text)]


def _strings(node):
    """Every string in a decoded JSON document, keys included (escapes such as \\u00a7 decoded)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


@pytest.mark.parametrize("text", ["seed 000 §2", "Source: 000 §2 and quick reference", "(§ 7)",
                                  "Before issue 18", "issue 28 (cold start)", "seed 004"])
def test_the_patterns_catch_the_internal_forms(text):
    assert internal_terms(text)


@pytest.mark.parametrize("text", ["'Why Your LLM Inference Is Slow (And How to Fix It)' (Spheron blog, 2026-03-29)",
                                  "vLLM GitHub issue #20264", "vLLM issues 2233 and 2253", "Gen5 x16"])
def test_the_patterns_let_public_citations_through(text):
    assert not internal_terms(text)


def test_rule_metadata_cites_no_internal_document():
    bad = {}
    for r in REGISTRY:
        texts = [r.code, r.name, r.summary, *(r.doc.section(key) for key in DOC_SECTIONS)]
        for key in r.thresholds:
            texts += [THRESHOLDS[key].source, THRESHOLDS[key].meaning]
        found = [t for text in texts for t in internal_terms(text)]
        if found:
            bad[r.code] = found
    assert not bad, f"rule docs, references or threshold sources cite internal documents: {bad}"


def test_every_threshold_source_cites_no_internal_document():
    bad = {key: internal_terms(f"{t.source} {t.meaning}") for key, t in THRESHOLDS.items()}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


@pytest.mark.parametrize("path", DOC_FILES, ids=[str(p.relative_to(REPO)) for p in DOC_FILES])
def test_docs_cite_no_internal_document(path):
    if not path.exists():
        pytest.skip(f"{path.name} is not in this checkout")
    bad = [(n, t) for n, line in enumerate(path.read_text().splitlines(), 1) for t in internal_terms(line)]
    assert not bad, f"{path.relative_to(REPO)}: (line, term) {bad}"


def test_there_are_docs_and_examples_to_check():
    assert len(DOC_FILES) >= 3 and (REPO / "docs" / "RULES.md") in DOC_FILES
    assert EXAMPLES, "no reports/examples/*.json"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_reports_cite_no_internal_document(path):
    bad = [t for s in _strings(json.loads(path.read_text())) for t in internal_terms(s)]
    assert not bad, f"{path.name}: {bad}"
