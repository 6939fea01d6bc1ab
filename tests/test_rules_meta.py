"""The registry's own discipline: codes, docs, fixtures, the catalog, thresholds and purity."""
from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest

from tests.rules_fixtures import FIXTURES
from triage.core.report import Severity
from triage.rules import CAUSES, REGISTRY, THRESHOLDS
from triage.rules.base import DOC_TITLES, Rule, RuleDoc
from triage.rules.docs import render_markdown
from triage.rules.registry import Registry, RegistryError, declaration_problems

REPO = Path(__file__).resolve().parent.parent
CATALOG = REPO / "tests" / "fixtures" / "rules-catalog.md"
DOC = RuleDoc(what="w", why="y", example="e", fix="f", references=("seed 000",))


def _rule(code="ZZZ001", name="a-rule", doc=DOC, **kw) -> Rule:
    return Rule(code=code, name=name, severity=Severity.LOW, inputs=("gpu",), doc=doc, check=lambda ctx: None, **kw)


def catalog_codes() -> dict[str, str]:
    rows = re.findall(r"^\| ([A-Z]+[0-9]{3}) \| ([a-z0-9-]+) \|", CATALOG.read_text(), flags=re.M)
    return dict(rows)


# --- the meta checks themselves fail on bad declarations -------------------------------------------
def test_duplicate_code_is_refused():
    reg = Registry()
    reg.add(_rule())
    with pytest.raises(RegistryError, match="duplicate rule code ZZZ001"):
        reg.add(_rule(name="another-name"))


def test_duplicate_name_is_refused():
    reg = Registry()
    reg.add(_rule())
    with pytest.raises(RegistryError, match="duplicate rule name"):
        reg.add(_rule(code="ZZZ002"))


@pytest.mark.parametrize("section", ["what", "why", "example", "fix"])
def test_missing_doc_section_is_refused(section):
    with pytest.raises(RegistryError, match=f"doc section '{section}' is empty"):
        Registry().add(_rule(doc=replace(DOC, **{section: "  "})))


def test_missing_references_and_bad_names_are_refused():
    problems = declaration_problems(_rule(code="kv1", name="Not_Kebab", doc=replace(DOC, references=()),
                                         thresholds=("NOPE.x",)))
    text = "; ".join(problems)
    for expected in ("not like KV001", "not kebab-case", "'references' is empty", "NOPE.x"):
        assert expected in text


def test_unknown_input_is_refused():
    r = Rule(code="ZZZ003", name="x", severity=Severity.LOW, inputs=("gpu|nvml",), doc=DOC, check=lambda c: None)
    assert any("unknown input 'nvml'" in p for p in declaration_problems(r))


# --- the real registry passes them ----------------------------------------------------------------
def test_every_catalog_code_has_its_rule_with_its_name():
    codes = catalog_codes()
    assert len(codes) >= 40, "the catalog copy did not parse"
    missing = sorted(set(codes) - set(REGISTRY.codes()))
    assert not missing, f"catalog codes without a rule: {missing}"
    renamed = {c: (n, REGISTRY.get(c).name) for c, n in codes.items() if REGISTRY.get(c).name != n}
    assert not renamed, f"codes whose meaning (name) changed: {renamed}"


def test_catalog_copy_is_current():
    candidates = [base / "shared" / "design" / "rules-catalog.md" for base in (REPO.parent, REPO.parent.parent)]
    shared = next((c for c in candidates if c.exists()), None)
    if shared is None:
        pytest.skip("the shared design folder is not next to this checkout")
    assert shared.read_text() == CATALOG.read_text(), "refresh tests/fixtures/rules-catalog.md from the design doc"


def test_every_declaration_is_clean():
    for r in REGISTRY:
        assert declaration_problems(r) == [], r.code


def test_every_rule_has_positive_and_negative_fixtures():
    import json
    lacking = []
    for code in REGISTRY.codes():
        files = list((FIXTURES / code).glob("*.json"))
        fires = [json.loads(p.read_text())["expect"]["fires"] for p in files]
        pos = [p for p, f in zip(files, fires, strict=True) if f and p.stem.startswith("positive")]
        neg = [p for p, f in zip(files, fires, strict=True) if not f and p.stem.startswith(("negative", "skipped"))]
        if not pos or not [p for p in neg if p.stem.startswith("negative")]:
            lacking.append(code)
    assert not lacking, f"rules without a positive and a negative fixture: {lacking}"


def test_no_fixture_dir_without_a_rule():
    dirs = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert dirs <= set(REGISTRY.codes()), dirs - set(REGISTRY.codes())


def test_every_threshold_is_declared_by_a_rule_and_has_a_source():
    declared = {k for r in REGISTRY for k in r.thresholds}
    assert set(THRESHOLDS) == declared, f"unused: {set(THRESHOLDS) - declared}"
    for key, t in THRESHOLDS.items():
        assert t.source and t.unit and t.meaning, key


def test_causal_links_name_real_rules():
    for cause, effects in CAUSES.items():
        assert cause in REGISTRY, cause
        assert all(e in REGISTRY for e in effects), (cause, effects)


def test_explain_prints_every_section():
    text = REGISTRY.get("KV001").explain()
    assert text.startswith("# KV001 (kv-cache-saturated)")
    for title in DOC_TITLES.values():
        assert f"## {title}" in text


def test_docs_rules_md_is_generated_from_the_registry():
    assert (REPO / "docs" / "RULES.md").read_text() == render_markdown(), \
        "regenerate: python -m triage.rules.docs > docs/RULES.md"


# --- purity: rules/ reads nothing from the system ---------------------------------------------------
ALLOWED_IMPORTS = {"__future__", "collections", "dataclasses", "difflib", "json", "math", "re", "shlex", "typing",
                   "pathlib", "sys", "tomllib", "tomli", "triage"}
FORBIDDEN_CALLS = {"open", "urlopen", "system", "popen", "run", "read_bytes", "write_text", "write_bytes"}


@pytest.mark.parametrize("path", sorted((REPO / "rules").glob("*.py")), ids=lambda p: p.name)
def test_rules_package_is_pure(path):
    """Beside import-linter's layer contract (.importlinter): rules import only the base layer and
    each other (and the pure engines registry), and call nothing that does I/O."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots = {(node.module or "").split(".")[0]}
            if node.module and node.module.startswith("triage."):
                assert node.module.startswith(("triage.core.", "triage.rules", "triage.engines")), node.module
        else:
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                assert name not in FORBIDDEN_CALLS, f"{path.name}: I/O call {name}()"
            continue
        assert roots <= ALLOWED_IMPORTS, f"{path.name} imports {roots - ALLOWED_IMPORTS}"
    if path.name != "triage_toml.py":  # the one reader of triage.toml
        assert "read_text" not in path.read_text(), path.name


# --- rules read typed data ---------------------------------------------------------------------------
# Every `x["key"]` and `.get("key")` left in rules/: each reads a shape triage does not own or documents
# as a mapping. Anything else is a typed attribute (a rename then fails the contract tests).
STRING_KEY_READS = {
    ("rules/catalog/eng003_spec_decode_low_acceptance.py", "num_speculative_tokens"):
        "vLLM's --speculative-config JSON object",
    ("rules/catalog/sched006_ttft_superlinear_in_context.py", "attention_backend"):
        "an engine module's notes, keyed by fact id (triage/engines/<engine>.py)",
    ("rules/context.py", "num_gpu_blocks"): "vLLM's cache_config_info labels (server_metrics.cache_config)",
    ("rules/context.py", "block_size"): "vLLM's cache_config_info labels (server_metrics.cache_config)",
}
MAX_STRING_KEY_READS = 20


def test_string_key_reads_in_rules_are_few_and_each_documented():
    pattern = re.compile(r'\[\"([a-z_0-9]+)\"\]|\.get\(\"([a-z_0-9]+)\"')
    found: list[tuple[str, str]] = []
    for path in sorted((REPO / "rules").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for m in pattern.finditer(path.read_text()):
            found.append((rel, m.group(1) or m.group(2)))
    assert len(found) <= MAX_STRING_KEY_READS, f"{len(found)} string-key reads in rules/: {found}"
    undocumented = sorted(set(found) - set(STRING_KEY_READS))
    assert not undocumented, f"read a typed field instead, or document the shape in STRING_KEY_READS: {undocumented}"
    assert not set(STRING_KEY_READS) - set(found), "remove the entries no rule reads any more"


def test_each_rule_decorator_sits_on_its_own_check():
    """`@rule("KV002", ...)` decorates `def kv002`: a helper slipped between them would become the rule."""
    import triage.rules as rules

    for r in rules.REGISTRY:
        assert r.check.__name__ == r.code.lower(), f"{r.code} is registered on {r.check.__name__}()"
