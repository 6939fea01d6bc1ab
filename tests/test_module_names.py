"""One name, one job: no two modules in the tree share a base name, unless they play the same role in parallel
packages (docs/ARCHITECTURE.md, "Names"). A newcomer who opens `config.py` should not have to ask which."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("triage", "probes", "rules", "reference_engine")

# Base name -> the role its modules share, each in its own package. Listed in docs/ARCHITECTURE.md.
PARALLEL = {
    "base.py": "what the package's unit is (a payload, an engine, a rule, an attention backend)",
    "registry.py": "the package's registry (engines, probes, rules)",
    "fmt.py": "its layer's number formatting (render, rules)",
    "http.py": "its layer's HTTP client (bench's streaming client, the probes' GETs)",
    "thresholds.py": "its judge's limits (compare's gate, the rules)",
    "section.py": "its report section's builder (baseline, plan, compare)",
    "run.py": "its loop (coldstart, watch)",
    "bench.py": "a command and its renderer (commands/, render/)",
    "gpu.py": "a probe and its payload type (probes/, triage/core/probe_data/)",
    "host.py": "a probe and its payload type",
    "logs.py": "a probe and its payload type",
    "topology.py": "a probe and its payload type",
    "vllm.py": "an engine's module and its importer (triage/engines/, triage/importers/)",
    "llamacpp.py": "an engine's module and its probe (triage/engines/, probes/)",
}


def _modules() -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for top in TOPS:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if path.name == "__init__.py" or any((ROOT / Path(*rel.parts[:i])).is_symlink()
                                                 for i in range(1, len(rel.parts))):
                continue
            by_name[path.name].append(rel.as_posix())
    return by_name


def test_no_two_modules_share_a_name_unless_they_share_a_role():
    shared = {name: paths for name, paths in _modules().items() if len(paths) > 1}
    unexplained = {name: sorted(paths) for name, paths in shared.items() if name not in PARALLEL}
    assert not unexplained, f"rename one so the names say the difference, or document the role: {unexplained}"
    assert not set(PARALLEL) - set(shared), "drop the PARALLEL entries no two modules share any more"


def test_the_parallel_names_are_documented():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    missing = [name for name in PARALLEL if f"`{name}`" not in text]
    assert not missing, f"docs/ARCHITECTURE.md's Names section does not list {missing}"
