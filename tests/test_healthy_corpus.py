"""Quiet when healthy (the severity policy): healthy configurations of every engine triage names
produce nothing above LOW, with every rule enabled. A better configuration with no symptom may show,
but only as an opportunity."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import offers
from tests.rule_cases._build import Edit, bench, cfg, gpu0, identity, metrics, process, snapshot
from triage.core.report import BenchSection, FindingKind, Severity
from triage.core.snapshot import Snapshot
from triage.rules import RulesConfig, evaluate

LCPP = Path(__file__).parent / "fixtures" / "llamacpp"
GPUS = {  # name, compute capability, memory
    "h100": ("NVIDIA H100 80GB HBM3", (9, 0), 80),
    "a100": ("NVIDIA A100-SXM4-80GB", (8, 0), 80),
    "l4": ("NVIDIA L4", (8, 9), 24),
}


def _run(snap: Snapshot, bench_: BenchSection | None, config: RulesConfig | None = None):
    return evaluate(snap, bench=bench_, config=config or RulesConfig(model_weight_bytes=16.06e9))


def _gpu(which: str) -> Edit:
    name, cc, gib = GPUS[which]
    return gpu0(name=name, compute_capability=cc, memory_total_bytes=gib * 2**30,
                memory_used_bytes=int(gib * 0.9) * 2**30, memory_free_bytes=int(gib * 0.1) * 2**30)


def _quiet(result) -> None:
    loud = [f"{f.code} {f.severity.value}: {f.title}" for f in result.findings if f.severity.rank < Severity.LOW.rank]
    assert not loud, loud
    for f in result.findings:
        assert f.kind is FindingKind.OPPORTUNITY or f.severity in (Severity.LOW, Severity.INFO), f.code
    errored = [s for s in result.skipped if "internal error" in s.reason]
    assert not errored, errored


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_healthy_vllm_v1_is_quiet(gpu):
    _quiet(_run(snapshot(_gpu(gpu)), bench()))


def test_healthy_sglang_is_quiet():
    sg = (cfg(engine="sglang", engine_version="0.5.10"), identity(engine="sglang", version="0.5.10"),
          metrics(engine="sglang"), process(engine="sglang"))
    _quiet(_run(snapshot(*sg), bench()))


def test_healthy_tgi_is_quiet():
    tgi = (cfg(engine="tgi", engine_version="3.3.7"), identity(engine="tgi", version="3.3.7"),
           metrics(engine="tgi"), process(engine="tgi"))
    _quiet(_run(snapshot(*tgi), bench()))


def _llamacpp(total_slots: int, waiting: float) -> tuple[Edit, ...]:
    props = json.loads((LCPP / "props_parallel1.json").read_text())
    return (identity(engine="llama.cpp", version=props["build_info"],
                     llamacpp={"total_slots": total_slots, "busy_slots": 0,
                               "ctx_per_slot_tokens": props["default_generation_settings"]["n_ctx"],
                               "build_info": props["build_info"]}),
            cfg(engine=None, engine_version=None, model="tiny.gguf"),
            metrics(engine="llama.cpp", num_requests_waiting_max=waiting, kv_cache_usage_frac_max=None,
                    kv_cache_usage_frac=None))


def test_llamacpp_one_slot_at_rest_is_at_most_an_opportunity():
    # The real capture at rest: --parallel 1, requests_deferred 0.
    idle = (LCPP / "metrics_parallel1_idle.txt").read_text()
    assert "llamacpp:requests_deferred 0" in idle
    result = _run(snapshot(*_llamacpp(1, 0.0), drop=("logs",)), None)
    _quiet(result)
    eng = [f for f in result.findings if f.code == "ENG001"]
    assert eng and eng[0].kind is FindingKind.OPPORTUNITY and "--parallel" in eng[0].fix.text


def test_llamacpp_one_slot_under_load_is_a_problem_with_parallel_in_the_fix():
    busy = (LCPP / "metrics_parallel1_under_load.txt").read_text()
    deferred = next(float(ln.split()[-1]) for ln in busy.splitlines() if ln.startswith("llamacpp:requests_deferred "))
    assert deferred >= 1
    result = _run(snapshot(*_llamacpp(1, deferred), drop=("logs",)), None)
    eng = [f for f in result.findings if f.code == "ENG001"]
    assert eng and eng[0].kind is FindingKind.PROBLEM and eng[0].severity.rank <= Severity.MEDIUM.rank
    assert offers(eng[0].fix, "--parallel 4")


def test_healthy_multi_slot_llamacpp_is_quiet():
    result = _run(snapshot(*_llamacpp(4, 0.0), drop=("logs",)), None)
    _quiet(result)
    assert not [f for f in result.findings if f.code == "ENG001"]


def test_transformers_like_server_at_rest_is_quiet():
    tfs = (identity(engine="transformers"), identity("batching", continuous=False),
           cfg(engine=None, engine_version=None))
    _quiet(_run(snapshot(*tfs, drop=("server_metrics", "logs")), None))


def test_the_live_reference_server_is_quiet(reference_server, tmp_path):
    from triage.diagnose import DiagnoseOptions, diagnose

    result = diagnose(DiagnoseOptions(url=reference_server.url, window_s=1.0, discover=False,
                                      skip=("storage", "kernel_log", "memory")))
    loud = [f"{f.code} {f.severity.value}" for f in result.report.findings if f.severity.rank < Severity.LOW.rank]
    assert not loud, loud
    assert result.report.target.engine == "reference"
