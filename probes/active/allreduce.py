"""The `allreduce` active probe: all-reduce bus bandwidth with torch.distributed, computed as nccl-tests
defines it (the `all_reduce_perf` step of "How to Diagnose and Fix Slow LLM Inference"):

    algbw = S / t          (S: bytes in the buffer, t: time of one all-reduce)
    busbw = algbw * 2 (n - 1) / n

busbw is independent of the rank count n, so it compares with what the slowest link should carry
(nccl-tests, doc/PERFORMANCE.md). Two runs:
- `nccl`: one process per visible GPU over NCCL (needs two or more GPUs);
- `gloo`: two CPU processes over gloo on loopback, so the whole path (spawn, rendezvous, timing) runs and is
  tested on any host.
Each rank is its own Python process started with `python -m triage.probes.active.allreduce`, under a hard
timeout. Keys: docs/SNAPSHOT.md, `allreduce`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from triage.core.extras import install_line
from triage.core.probe_data.active import AllreduceData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.registry import ProbeRun, register

MIB = 2**20
GLOO_BYTES = 32 * MIB
NCCL_BYTES = 256 * MIB
DEFAULT_BUDGET_S = 8.0
# Allowance for each rank's interpreter to start and import torch (seconds on a loaded host), on top of
# the timed part: a slow start is not a slow all-reduce, but a hung rendezvous must still end.
STARTUP_S = 45.0


def bus_bandwidth_factor(world_size: int) -> float:
    """nccl-tests' all-reduce factor: 2 (n - 1) / n (1 for two ranks, 1.75 for eight)."""
    return 2.0 * (world_size - 1) / world_size


# --------------------------------------------------------------------------------------------
# One rank (runs in its own process)


def _rank_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--backend", choices=("gloo", "nccl"), required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--bytes", type=int, required=True)
    p.add_argument("--time-s", type=float, required=True)
    a = p.parse_args(argv)
    import datetime

    import torch
    import torch.distributed as dist

    dist.init_process_group(a.backend, init_method=a.init, rank=a.rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=max(30.0, 4 * a.time_s)))
    try:
        if a.backend == "nccl":
            torch.cuda.set_device(a.rank)
            dev = torch.device("cuda", a.rank)
            x = torch.ones(a.bytes // 2, dtype=torch.bfloat16, device=dev)
            sync = torch.cuda.synchronize
        else:
            torch.set_num_threads(1)
            x = torch.ones(a.bytes // 4, dtype=torch.float32)

            def sync() -> None:
                return None
        for _ in range(2):                              # warm-up: connections, buffers
            dist.all_reduce(x)
        sync()
        times: list[float] = []
        deadline = time.perf_counter() + a.time_s
        while True:
            dist.barrier()
            sync()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            sync()
            times.append(time.perf_counter() - t0)
            # every rank must take the same number of steps: rank 0 decides, all follow
            go = torch.tensor([1 if (len(times) < 3 or (len(times) < 50 and time.perf_counter() < deadline))
                               else 0], dtype=torch.int32, device=x.device)
            dist.broadcast(go, 0)
            if not int(go.item()):
                break
        if a.rank == 0:
            size = x.numel() * x.element_size()
            t = statistics.median(times)
            algbw = size / t
            sys.stdout.write(json.dumps({
                "backend": a.backend, "world_size": a.world, "size_bytes": size, "dtype": str(x.dtype).split(".")[-1],
                "num_iterations": len(times), "time_ms_median": round(t * 1e3, 3),
                "time_ms_best": round(min(times) * 1e3, 3),
                "algbw_gbps": round(algbw / 1e9, 3),
                "busbw_gbps": round(algbw * bus_bandwidth_factor(a.world) / 1e9, 3),
                "busbw_gbps_best": round(size / min(times) * bus_bandwidth_factor(a.world) / 1e9, 3),
            }) + "\n")
    finally:
        dist.destroy_process_group()
    return 0


# --------------------------------------------------------------------------------------------
# The probe (runs the ranks)


def run_ranks(backend: str, world: int, size_bytes: int, time_s: float, timeout_s: float) -> dict[str, Any]:
    """Start `world` rank processes and return rank 0's figures; raises RuntimeError with the reason."""
    with tempfile.TemporaryDirectory(prefix="triage-allreduce-") as tmp:
        init = "file://" + os.path.join(tmp, "rendezvous")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": _pythonpath()}
        procs = []
        for rank in range(world):
            cmd = [sys.executable, "-m", "triage.probes.active.allreduce", "--rank", str(rank), "--world", str(world),
                   "--backend", backend, "--init", init, "--bytes", str(size_bytes), "--time-s", str(time_s)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True))
        deadline = time.monotonic() + timeout_s
        outs: list[tuple[str, str]] = []
        try:
            for proc in procs:
                outs.append(proc.communicate(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the {world} {backend} ranks did not finish within {timeout_s:.0f} s") from None
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        bad = [(i, p.returncode, outs[i][1] if i < len(outs) else "") for i, p in enumerate(procs) if p.returncode]
        if bad:
            i, rc, err = bad[0]
            last = (err.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"rank {i} exited with status {rc}: {last[:300]}")
        lines = [ln for ln in outs[0][0].splitlines() if ln.startswith("{")]
        if not lines:
            raise RuntimeError("rank 0 printed no result")
        return json.loads(lines[-1])


def _pythonpath() -> str:
    """The children must import this same triage: the first folder above this file holding
    `triage/__init__.py` goes first on their PYTHONPATH."""
    here = os.path.dirname(os.path.realpath(__file__))
    root = None
    while True:
        if os.path.isfile(os.path.join(here, "triage", "__init__.py")):
            root = here
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    parts = ([root] if root else []) + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def _num_cuda_gpus() -> tuple[int, str | None]:
    try:
        import torch
    except ImportError:
        return 0, f"torch is not installed: {install_line('engine')}"
    if getattr(torch.version, "cuda", None) is None:
        return 0, f"torch {torch.__version__} is a CPU-only build: no NCCL"
    if not torch.cuda.is_available():
        return 0, "torch sees no CUDA GPU"
    if not torch.distributed.is_nccl_available():
        return 0, "this torch build has no NCCL"
    n = torch.cuda.device_count()
    if n < 2:
        return n, f"{n} GPU visible: an all-reduce needs two or more"
    return n, None


def probe_allreduce(budget_s: float = DEFAULT_BUDGET_S, gloo_bytes: int = GLOO_BYTES,
                    nccl_bytes: int = NCCL_BYTES) -> ProbeResult:
    start = time.perf_counter()
    unsupported: list[str] = []
    data: dict[str, Any] = {"method": "torch.distributed all_reduce (sum), median time over the iterations; "
                                      "busbw = S/t x 2(n-1)/n as nccl-tests defines it; GB/s = 1e9 bytes/s"}
    n_gpus, nccl_why = _num_cuda_gpus()
    nccl_share = 0.6 if nccl_why is None else 0.0
    try:
        import torch.distributed as dist
        gloo_ok = dist.is_available() and dist.is_gloo_available()
    except ImportError:
        return ProbeResult("allreduce", ProbeStatus.UNSUPPORTED, time.perf_counter() - start,
                           f"torch is not installed: {install_line('engine')}", {})
    if gloo_ok:
        time_s = min(2.0, budget_s * (1 - nccl_share) / 2)
        try:
            data["gloo"] = run_ranks("gloo", 2, gloo_bytes, time_s=time_s, timeout_s=time_s * 3 + STARTUP_S)
        except (RuntimeError, OSError, ValueError) as e:
            data["gloo"], data["gloo_reason"] = None, str(e)
            unsupported.append("gloo")
    else:
        data["gloo"], data["gloo_reason"] = None, "this torch build has no gloo backend"
        unsupported.append("gloo")
    if nccl_why is None:
        try:
            time_s = min(3.0, budget_s * nccl_share / 2)
            data["nccl"] = run_ranks("nccl", n_gpus, nccl_bytes, time_s=time_s, timeout_s=time_s * 3 + STARTUP_S)
        except (RuntimeError, OSError, ValueError) as e:
            data["nccl"], data["nccl_reason"] = None, str(e)
            unsupported.append("nccl")
    else:
        data["nccl"], data["nccl_reason"] = None, nccl_why
        unsupported.append("nccl")
    data["num_gpus"] = n_gpus
    data["unsupported_fields"] = unsupported
    if data.get("gloo") is None and data.get("nccl") is None:
        reason = "; ".join(f"{k}: {data.get(k + '_reason')}" for k in ("gloo", "nccl"))
        status = ProbeStatus.ERROR if gloo_ok else ProbeStatus.UNSUPPORTED
        return ProbeResult("allreduce", status, time.perf_counter() - start, reason, AllreduceData.build(data))
    return ProbeResult("allreduce", ProbeStatus.OK, time.perf_counter() - start, None, AllreduceData.build(data))


BUDGET_S = 8.0


# Two rank launches (gloo, then NCCL), each with its start-up allowance, on top of the timed budget.
@register("allreduce", phase=4, order=150, timeout_s=lambda run: BUDGET_S + 2 * STARTUP_S + 10, active=True,
          budget_s=BUDGET_S, extra="engine")
def _run(run: ProbeRun) -> ProbeResult:
    return probe_allreduce(BUDGET_S)


if __name__ == "__main__":
    raise SystemExit(_rank_main())
