"""Real incidents as server logs: each from a public issue thread, its figures written in the engine's own format
strings, with the cause the thread established (tests/test_log_incidents.py diagnoses each with a log alone).

Regenerate the fixture files after editing a case:  python -m tests.incidents
"""
from __future__ import annotations

from pathlib import Path

from tests.incidents.build import Incident
from tests.incidents.cases_other import nccl_incidents, offload_incidents, sglang_incidents, tgi_incidents
from tests.incidents.cases_startup import capture_incidents, healthy, slow_load_incidents
from tests.incidents.cases_vllm import incidents as vllm_incidents

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "incidents"


def all_incidents() -> list[Incident]:
    out = [*vllm_incidents(), *sglang_incidents(), *tgi_incidents(), *offload_incidents(), *nccl_incidents(),
           *capture_incidents(), *slow_load_incidents(), *healthy()]
    names = [i.name for i in out]
    assert len(names) == len(set(names)), "two incidents share a name"
    return out


def write_all(root: Path = FIXTURES) -> int:
    root.mkdir(parents=True, exist_ok=True)
    wanted = {root / f"{i.name}.log": i.text() for i in all_incidents()}
    for old in root.glob("*.log"):
        if old not in wanted:
            old.unlink()
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
    return len(wanted)
