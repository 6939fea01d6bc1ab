"""Microbenchmarks: the arithmetic from timings to rates, and honest 'unsupported' results."""
from __future__ import annotations

import pytest
import torch

from triage.reference_engine.host import microbench
from triage.reference_engine.host.microbench import (
    MIB,
    MatmulResult,
    MicrobenchResult,
    measure_bandwidth,
    measure_matmul,
    run_microbench,
)


def matmul_for(r: MicrobenchResult, device: str, dtype: str) -> MatmulResult | None:
    return next((m for m in r.matmul if m.device == device and m.dtype == dtype), None)


@pytest.fixture
def fixed_timer(monkeypatch):
    """Every timed call takes exactly 0.5 s, so rates follow from the byte and FLOP counts alone."""
    monkeypatch.setattr(microbench, "_timer", lambda device: (lambda fn: (fn(), 0.5)[1]))


def test_bandwidth_counts_read_and_write_bytes(fixed_timer):
    r = measure_bandwidth("cpu", buffer_bytes=4 * MIB, num_repeats=3)
    assert r.buffer_bytes == 4 * MIB and r.num_repeats == 3
    assert r.best_bytes_per_s == pytest.approx(2 * 4 * MIB / 0.5)   # copy: read + write
    assert r.read_best_bytes_per_s == pytest.approx(4 * MIB / 0.5)  # sum: read only


def test_matmul_flops_are_two_n_cubed_over_time(fixed_timer):
    r = measure_matmul("cpu", "fp32", n=64, num_repeats=2)
    assert r.supported and r.num_repeats == 2
    assert r.best_flops_per_s == pytest.approx(2 * 64 ** 3 / 0.5)
    assert r.median_flops_per_s == pytest.approx(r.best_flops_per_s)


def test_unknown_dtype_is_an_error():
    with pytest.raises(ValueError, match="unknown matmul dtype"):
        measure_matmul("cpu", "int3", n=16)


def test_real_quick_run_on_this_host_reports_positive_rates():
    r = run_microbench(["cpu"], quick=True, buffer_bytes=32 * MIB, matmul_n=128)
    bw = r.bandwidth_for("cpu")
    assert bw is not None and bw.best_bytes_per_s >= bw.median_bytes_per_s > 1e8  # > 0.1 GB/s
    for dtype in ("fp32", "bf16"):
        mm = matmul_for(r, "cpu", dtype)
        assert mm is not None and mm.supported and mm.best_flops_per_s > 1e8
    assert matmul_for(r, "cpu", "fp8") is not None
    assert r.bandwidth_for("cuda") is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the no-GPU path")
def test_cuda_requested_without_gpu_is_a_note_not_a_zero():
    r = run_microbench(["cuda"], quick=True)
    assert r.bandwidth == () and r.matmul == ()
    assert any("cuda" in n for n in r.notes)


@pytest.mark.gpu
def test_gpu_bandwidth_and_fp8_support_are_measured():
    r = run_microbench(["cuda"], quick=True)
    bw = r.bandwidth_for("cuda")
    assert bw is not None and bw.best_bytes_per_s > 1e11  # any datacenter GPU copies > 100 GB/s
    fp8 = matmul_for(r, "cuda", "fp8")
    major, minor = torch.cuda.get_device_capability()
    assert fp8 is not None and fp8.supported == ((major, minor) >= (8, 9))
