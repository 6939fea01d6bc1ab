"""`triage diagnose --active`: the host memory implementation (shared with the memory probe and `triage
baseline`), the gloo all-reduce, the GPU probes' `unsupported` answers here and their real runs on a GPU
host (@pytest.mark.gpu), and the command end to end on this host."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage.cli import app
from triage.core.snapshot import ProbeStatus
from triage.core.specs import pcie_bytes_per_s
from triage.probes.active import host_memory
from triage.probes.active.allreduce import bus_bandwidth_factor, probe_allreduce
from triage.probes.active.hbm import probe_hbm
from triage.probes.active.host_memory import (
    HostBandwidth,
    default_buffer_bytes,
    last_level_cache_bytes,
    measure_host_bandwidth,
    probe_host_memory,
)
from triage.probes.active.matmul import probe_matmul
from triage.probes.active.pcie import probe_pcie

MIB = 2**20


def _cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def cli(*args: str):
    # The width is set here: a COLUMNS the shell exported would wrap the sentences the tests look for.
    return CliRunner().invoke(app, ["--no-color", *args], env={"COLUMNS": "200"})


# -- host memory ----------------------------------------------------------------------------------

def test_host_bandwidth_measures_copy_and_read_on_every_allowed_cpu():
    bw = measure_host_bandwidth(buffer_bytes=16 * MIB, max_time_s=0.2)
    assert bw.num_threads == len(host_memory.allowed_cpus())
    assert abs(bw.buffer_bytes - 16 * MIB) < 64 * bw.num_threads
    assert bw.num_repeats >= 2
    assert 1e8 < bw.copy_median_bytes_per_s <= bw.copy_best_bytes_per_s < 1e13
    assert bw.read_best_bytes_per_s is not None and bw.read_best_bytes_per_s > 1e8


def _fake_cpu_sysfs(root: Path, l3_groups: list[str], l3_size: str = "32768K") -> None:
    for cpu, group in enumerate(l3_groups):
        for idx, (level, size, shared) in enumerate([("1", "32K", str(cpu)), ("2", "512K", str(cpu)),
                                                     ("3", l3_size, group)]):
            d = root / f"devices/system/cpu/cpu{cpu}/cache/index{idx}"
            d.mkdir(parents=True)
            (d / "level").write_text(level + "\n")
            (d / "size").write_text(size + "\n")
            (d / "shared_cpu_list").write_text(shared + "\n")


def test_last_level_cache_sums_distinct_instances(tmp_path):
    _fake_cpu_sysfs(tmp_path, ["0-1", "0-1", "2-3", "2-3"])
    assert last_level_cache_bytes(str(tmp_path)) == 64 * MIB          # two L3 instances of 32 MiB
    assert default_buffer_bytes(str(tmp_path), llc_bytes=64 * MIB) == 256 * MIB or \
        default_buffer_bytes(str(tmp_path), llc_bytes=64 * MIB) >= 64 * MIB   # capped by free RAM on tiny hosts
    assert last_level_cache_bytes(str(tmp_path / "missing")) is None
    assert default_buffer_bytes(str(tmp_path / "missing"), llc_bytes=None) == 64 * MIB


def test_host_memory_probe_measures_each_numa_node_on_its_own_cpus(tmp_path):
    cpus = host_memory.allowed_cpus()
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to fake two NUMA nodes")
    for node, cpu in enumerate(cpus[:2]):
        d = tmp_path / f"devices/system/node/node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(f"{cpu}\n")
    calls = []

    def fake(buffer_bytes, cpus, max_time_s):
        calls.append(tuple(cpus))
        rate = 100e9 if len(cpus) > 1 else (40e9 if cpus[0] == calls[1][0] else 20e9)
        return HostBandwidth(buffer_bytes, len(cpus), tuple(cpus), 3, rate, rate, rate, rate)

    r = probe_host_memory(budget_s=1.0, sys_root=str(tmp_path), buffer_bytes=128 * MIB, measure=fake)
    assert r.status is ProbeStatus.OK
    assert calls[0] == tuple(sorted(cpus)) and calls[1] == (cpus[0],) and calls[2] == (cpus[1],)
    assert [n.node for n in r.data.nodes] == [0, 1]
    assert [n.copy_bandwidth_gbps for n in r.data.nodes] == [40.0, 20.0]
    assert r.data.copy_bandwidth_gbps == 100.0 and r.data.num_numa_nodes == 2


def test_host_memory_probe_runs_here():
    r = probe_host_memory(budget_s=0.5, buffer_bytes=16 * MIB)
    assert r.status is ProbeStatus.OK, r.reason
    assert r.data.copy_bandwidth_gbps > 0.1 and r.data.read_bandwidth_gbps > 0.1
    assert len(r.data.nodes) >= 1 or "nodes" in r.data.unsupported_fields


def test_memory_probe_and_baseline_use_the_one_host_implementation(monkeypatch):
    """The memory probe's copy figure and `triage baseline`'s CPU bandwidth both come from
    probes/active/host_memory.measure_host_bandwidth: replace it, and both report the replacement."""
    from triage.baseline.host_bandwidth import host_bandwidth
    from triage.probes.memory import copy_bandwidth_gbps

    seen = []

    def fake(buffer_bytes=None, num_threads=None, cpus=None, num_repeats=10, max_time_s=2.0, read=True):
        seen.append(buffer_bytes)
        return HostBandwidth(buffer_bytes, num_threads or 1, (0,), 2, 12.5e9, 12.0e9, 20e9, 19e9)

    monkeypatch.setattr(host_memory, "measure_host_bandwidth", fake)
    import triage.baseline.host_bandwidth as hb
    monkeypatch.setattr(hb, "measure_host_bandwidth", fake)
    assert copy_bandwidth_gbps(0.1, 8 * MIB) == 12.0            # the memory probe reports the median
    b = host_bandwidth(8 * MIB, 3, 0.1, num_threads=2)
    assert (b.device, b.best_bytes_per_s, b.read_best_bytes_per_s) == ("cpu", 12.5e9, 20e9)
    assert "host_memory" in b.method and seen == [8 * MIB, 8 * MIB]


def test_baseline_microbench_takes_the_host_function():
    from triage.baseline.host_bandwidth import host_bandwidth
    from triage.reference_engine.host.microbench import run_microbench

    r = run_microbench(["cpu"], quick=True, buffer_bytes=16 * MIB, matmul_n=64, host_bandwidth=host_bandwidth)
    assert "triage.probes.active.host_memory" in r.bandwidth[0].method
    assert r.bandwidth[0].best_bytes_per_s > 1e8


# -- PCIe arithmetic and the all-reduce -------------------------------------------------------------

def test_pcie_link_rates():
    assert round(pcie_bytes_per_s(5, 16) / 1e9, 1) == 63.0
    assert round(pcie_bytes_per_s(3, 8) / 1e9, 2) == 7.88
    assert pcie_bytes_per_s(3, 8) / pcie_bytes_per_s(5, 16) == pytest.approx(1 / 8)
    assert round(pcie_bytes_per_s(1, 16) / 1e9, 1) == 4.0           # 8b/10b
    assert pcie_bytes_per_s(9, 16) is None and pcie_bytes_per_s(4, 0) is None


def test_bus_bandwidth_factor_is_nccl_tests():
    assert bus_bandwidth_factor(2) == 1.0
    assert bus_bandwidth_factor(8) == 1.75


@pytest.mark.slow
def test_gloo_allreduce_runs_between_two_processes():
    r = probe_allreduce(budget_s=6.0, gloo_bytes=4 * MIB)
    assert r.status is ProbeStatus.OK, r.reason
    g = r.data.gloo
    assert g.backend == "gloo" and g.world_size == 2 and g.size_bytes == 4 * MIB
    assert g.num_iterations >= 3 and g.busbw_gbps > 0
    assert g.busbw_gbps == pytest.approx(g.algbw_gbps, rel=0.01)       # 2 ranks: factor 1
    assert g.algbw_gbps == pytest.approx(g.size_bytes / (g.time_ms_median / 1e3) / 1e9, rel=0.01)
    if not _cuda():
        assert r.data.nccl is None and r.data.nccl_reason


# -- GPU probes -------------------------------------------------------------------------------------

@pytest.mark.skipif(_cuda(), reason="this host has a CUDA GPU")
@pytest.mark.parametrize("probe", [probe_pcie, probe_hbm, probe_matmul])
def test_gpu_probes_are_unsupported_with_the_reason_without_cuda(probe):
    r = probe(budget_s=0.5)
    assert r.status is ProbeStatus.UNSUPPORTED
    assert r.reason and ("CUDA" in r.reason or "torch" in r.reason)
    assert r.data in (None, {})    # nothing measured: no payload


@pytest.mark.gpu
def test_pcie_probe_on_a_gpu():
    r = probe_pcie(budget_s=2.0, buffer_bytes=64 * MIB)
    assert r.status is ProbeStatus.OK
    g = r.data.gpus[0]
    assert g.h2d_pageable_gbps > 0.5 and g.d2h_pageable_gbps > 0.5
    if g.h2d_pinned_gbps is not None:
        assert g.h2d_pinned_gbps > 0.5
        if g.link_theoretical_gbps:
            assert 0.05 < g.h2d_pinned_share < 1.05          # never faster than the link itself
    # What rules GPU004 and TOPO005 read is filled on a real GPU (the CPU host cannot produce it).
    assert g.pcie_link_gen_max is not None and g.pcie_link_width_max is not None


@pytest.mark.gpu
def test_hbm_probe_on_a_gpu():
    r = probe_hbm(budget_s=1.0, buffer_bytes=256 * MIB)
    g = r.data.gpus[0]
    assert r.status is ProbeStatus.OK and g.copy_bandwidth_gbps > 50 and g.name and g.index == 0
    if g.spec_bandwidth_gbps:
        assert 0.2 < g.share_of_spec < 1.05


@pytest.mark.gpu
def test_matmul_probe_on_a_gpu():
    r = probe_matmul(budget_s=1.0, n=4096)
    g = r.data.gpus[0]
    assert r.status is ProbeStatus.OK and g.bf16_tflops > 1
    if g.bf16_spec_tflops:
        assert 0.1 < g.bf16_share_of_spec < 1.1
    assert g.fp8_tflops is not None or g.fp8_reason


@pytest.mark.gpu
def test_nccl_allreduce_when_two_gpus():
    import torch
    if torch.cuda.device_count() < 2:
        r = probe_allreduce(budget_s=4.0, gloo_bytes=4 * MIB)
        assert r.data.nccl is None and "two or more" in r.data.nccl_reason
        return
    r = probe_allreduce(budget_s=10.0, gloo_bytes=4 * MIB, nccl_bytes=64 * MIB)
    n = r.data.nccl
    assert n and n.world_size == torch.cuda.device_count() and n.busbw_gbps > 1


# -- the command ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_diagnose_active_end_to_end_here(tmp_path, report_validator):
    out = tmp_path / "r.json"
    res = cli("diagnose", "--active", "--no-discover", "--window-s", "0", "--skip", "storage,kernel_log",
              "--json", str(out))
    assert res.exit_code == 0, res.output
    assert "loads the CPU and GPUs" in res.output          # said before it starts
    assert "Measured against the spec (--active):" in res.output
    assert "host memory copy" in res.output and "all-reduce gloo busbw" in res.output
    body = json.loads(out.read_text())
    report_validator(body)
    probes = {p["name"]: p for p in body["probes"]}
    assert probes["host_memory"]["status"] == "ok" and probes["host_memory"]["data"]["copy_bandwidth_gbps"] > 0
    assert probes["allreduce"]["status"] == "ok" and probes["allreduce"]["data"]["gloo"]["busbw_gbps"] > 0
    for name in ("pcie", "hbm", "matmul"):
        assert name in probes
        if not _cuda():
            assert probes[name]["status"] == "unsupported" and probes[name]["reason"]


def test_diagnose_active_needs_the_engine_extra(torch_not_installed):
    res = cli("diagnose", "--active", "--no-discover")
    assert res.exit_code == 2
    assert "needs the 'engine' extra (torch not installed): pip install" in res.output
    assert "'triage[engine]'" not in res.output


def test_diagnose_active_cannot_replay(tmp_path):
    res = cli("diagnose", "--active", "--from", str(tmp_path / "x.json"))
    assert res.exit_code == 2 and "--active" in res.output


def test_skip_names_active_probes_only_with_active():
    res = cli("diagnose", "--no-discover", "--window-s", "0", "--skip", "pcie")
    assert res.exit_code == 2 and "no such probe" in res.output


# -- the NVML capture the GPU validation run saves as a fixture ----------------------------------------

@pytest.mark.parametrize("name", ["h100_x2_healthy_nvlink.json", "a100_power_capped_pcie_gen3x8.json",
                                  "rtx4090_not_supported_fields.json"])
def test_nvml_capture_replays_to_the_same_probe_data(name):
    """capture(fake) -> scenario -> FakeNvml(scenario) gives the gpu probe the same answers as the original:
    the capture writes what fake_pynvml replays (so a real capture is a usable fixture)."""
    from tests.fixtures.nvml.capture import capture
    from tests.fixtures.nvml.fake_pynvml import FakeNvml, load
    from triage.probes.gpu import probe_gpu

    def stable(result):
        gpus = [{k: v for k, v in g.items() if k not in ("utilization_gpu_pct", "utilization_gpu_pct_max",
                                                         "throttle_time_delta_us", "throttle_time_frac",
                                                         "compute_processes", "uuid", "pcie_read_utilization_gpu_pct")}
                for g in result.data.to_dict()["gpus"]]
        return result.status, gpus, result.data.to_dict().get("topology")

    original = probe_gpu(nvml=load(name), window_s=0)
    scenario = capture(load(name))
    assert all(g["uuid"].startswith("GPU-0000000") for g in scenario["gpus"])
    replayed = probe_gpu(nvml=FakeNvml(json.loads(json.dumps(scenario))), window_s=0)
    assert stable(replayed) == stable(original)


# -- the GPU validation command ----------------------------------------------------------------------

def _gpu_validation(*args: str):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, str(repo / "benchmarks" / "gpu_validation.py"), *args],
                          capture_output=True, text=True, timeout=600, cwd=repo)


def test_gpu_validation_dry_run_writes_its_json(tmp_path):
    p = _gpu_validation(str(tmp_path / "out"), "--dry-run")
    assert p.returncode == 0, p.stderr
    body = json.loads((tmp_path / "out" / "gpu_validation.json").read_text())
    assert list(body["steps"]) == ["gpu_tests", "diagnose_active", "nvml_capture", "triton_attention",
                                   "engine_roofline", "quant_weights", "compiled_step"]
    assert all(s["status"] == "skipped" and s["reason"] == "dry run" for s in body["steps"].values())


@pytest.mark.skipif(_cuda(), reason="checks the no-GPU answers")
def test_gpu_validation_without_a_gpu_skips_with_reasons(tmp_path):
    fixtures = tmp_path / "fixtures"
    p = _gpu_validation(str(tmp_path / "out"), "--steps",
                        "nvml_capture,triton_attention,engine_roofline,quant_weights,compiled_step", "--fixture-dir",
                        str(fixtures))
    assert p.returncode == 0, p.stderr
    body = json.loads((tmp_path / "out" / "gpu_validation.json").read_text())
    assert set(body["steps"]) == {"nvml_capture", "triton_attention", "engine_roofline", "quant_weights",
                                  "compiled_step"}
    for step in body["steps"].values():
        assert step["status"] == "skipped" and "no CUDA GPU" in step["reason"]
    assert "no CUDA GPU on this host" in body["note"] and not fixtures.exists()


def test_gpu_validation_rejects_unknown_steps(tmp_path):
    p = _gpu_validation(str(tmp_path), "--steps", "gpu_tests,warp_drive")
    assert p.returncode == 2 and "warp_drive" in p.stderr


def test_measured_rows_put_each_figure_next_to_its_spec():
    from tests.rules_fixtures_active import healthy_active
    from triage.core.probe_data import read_payload
    from triage.core.snapshot import ProbeResult
    from triage.diagnose.active_probes import measured_rows

    probes = [ProbeResult(n, ProbeStatus.OK, 1.0, None, read_payload(n, d)) for n, d in healthy_active().items()]
    rows = {r["measure"]: r for r in measured_rows(probes, weight_bytes=8.5e9)}
    pcie = rows["GPU 0 PCIe H2D pinned"]
    assert (pcie["measured"], pcie["expected"], pcie["share"]) == ("53.6 GB/s", "Gen5 x16 63.0 GB/s", "85%")
    hbm = rows["GPU 0 memory copy (D2D)"]
    assert hbm["share"] == "87%" and "batch-1 decode <= 342 tok/s measured, 394 at spec" in hbm["note"]
    assert rows["GPU 0 bf16 matmul"]["expected"] == "989.4 TFLOP/s spec"
    assert rows["  NUMA node 1 copy"]["measured"] == "152.0 GB/s"
    assert rows["all-reduce nccl"]["measured"] == "unsupported" and "two or more" in rows["all-reduce nccl"]["note"]
    gone = measured_rows([ProbeResult("pcie", ProbeStatus.UNSUPPORTED, 0.0, "no CUDA")])
    assert gone == [{"measure": "pcie", "measured": "unsupported", "expected": "-", "share": "-", "note": "no CUDA"}]
