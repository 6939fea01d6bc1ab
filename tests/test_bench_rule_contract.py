"""The bench -> rule contract, as tests/test_probe_rule_contract.py is for probes: every field of the typed bench
records (triage/core/bench_data.py: a level's server window, GPU samples, connections, replicas, and the bench
config's view) that a rule reads is filled by a real bench.

1. *Produced*: a bench against the bundled reference engine on loopback (its /metrics window, connections, an
   SLO and a shared prefix in the config), a bench over two loopback replicas named by role (`#decode` the
   reference engine, `#prefill` a fake OpenAI server; least-in-flight balancing), and the GPU sampler over a
   fake NVML scenario whose clocks are power-capped.
2. *Read*: every rule over every rule fixture and golden scenario, with the bench records wrapped so that each
   attribute read is recorded.
3. Every read must be produced: a renamed field, or one no bench fills, fails here with the rule-side name.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fake_servers import FakeOpenAIServer
from tests.fixtures.nvml.fake_pynvml import load as load_nvml
from tests.test_probe_rule_contract import _produced, _recording, _snapshots
from triage.bench.server_scrape import GpuSampler
from triage.cli import app
from triage.core import bench_data
from triage.core.report_io import read_report
from triage.rules import evaluate

BENCH_TYPES = {name for name, obj in vars(bench_data).items()
               if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == bench_data.__name__}


def _bench(tmp_path, name: str, *args: str) -> Any:
    out = tmp_path / f"{name}.json"
    result = CliRunner().invoke(app, ["bench", *args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    return read_report(out).bench


@pytest.fixture(scope="module")
def produced(tmp_path_factory, reference_server) -> set[str]:
    tmp = tmp_path_factory.mktemp("bench_contract")
    out: set[str] = set()
    sections = [_bench(tmp, "reference", "--url", reference_server.url, "--concurrency", "1,4", "--num-requests", "8",
                       "--input-len", "48", "--output-len", "8", "--shared-prefix-len", "16",
                       "--slo", "ttft_ms=2000,tpot_ms=500,e2e_ms=9000")]
    with FakeOpenAIServer() as fake:     # beside the reference engine, which exports its cache configuration
        sections.append(_bench(tmp, "fleet", "--url", reference_server.url + "#decode", "--url", fake.url + "#prefill",
                               "--balance", "least-in-flight", "--concurrency", "2", "--num-requests", "8",
                               "--input-len", "16", "--output-len", "4"))
    for section in sections:
        _produced(section.levels, out)
        _produced(section.config, out)
    sampler, reason = GpuSampler.create(nvml=load_nvml("a100_power_capped_pcie_gen3x8.json"))   # clocks capped
    assert reason is None
    sampler.sample_once()
    _produced(sampler.stop(), out)
    return {p for p in out if p.split(".")[0] in BENCH_TYPES}


def _reads() -> tuple[set[str], list[str]]:
    reads: set[str] = set()
    errors: list[str] = []
    for case, snap, bench, baseline, config in _snapshots():
        if bench is None:
            continue
        levels = tuple(dataclasses.replace(lv, **{k: _recording(getattr(lv, k), reads) for k in
                                                  ("server", "gpu", "connections", "replicas")})
                       for lv in bench.levels)
        recorded = dataclasses.replace(bench, config=_recording(bench.config, reads), levels=levels)
        result = evaluate(snap, bench=recorded, baseline=baseline, config=config)
        errors += [f"{case}: {s.code} {s.reason}" for s in result.skipped if "internal error" in s.reason]
    return {r for r in reads if r.split(".")[0] in BENCH_TYPES}, errors


def test_every_bench_field_a_rule_reads_is_filled_by_a_real_bench(produced):
    reads, errors = _reads()
    assert not errors, "rules failed on the typed bench records:\n" + "\n".join(errors[:20])
    assert len(reads) > 15, f"the recorder saw only {len(reads)} bench reads; is it wired?"
    missing = sorted(reads - produced)
    assert not missing, ("rules read bench fields that no real bench fills (renamed, removed, or never filled):\n  "
                         + "\n  ".join(missing))


def test_the_bench_json_round_trips_through_the_types(tmp_path, reference_server):
    """A level's server window written by bench and read back is the same typed record (no key lost)."""
    section = _bench(tmp_path, "again", "--url", reference_server.url, "--concurrency", "2", "--num-requests", "4",
                     "--input-len", "16", "--output-len", "4")
    raw = json.loads((tmp_path / "again.json").read_text())["bench"]["levels"][0]
    assert set(raw["server"]) == {f.name for f in dataclasses.fields(bench_data.LevelServer)}
    conns = section.levels[0].connections
    assert section.levels[0].server.num_scrapes >= 2 and conns.opened + conns.reused >= 4
