"""One command for a GPU host: everything in triage that needs a GPU, run and recorded as JSON.

    python benchmarks/gpu_validation.py OUT_DIR            # or: benchmarks/gpu_validation.sh OUT_DIR
    python benchmarks/gpu_validation.py OUT_DIR --dry-run  # list the steps, run none

Steps (each writes its log and files into OUT_DIR; OUT_DIR/gpu_validation.json sums them up):
1. gpu_tests        the @pytest.mark.gpu tests (junit XML; counts of passed, failed, skipped);
2. diagnose_active  `triage diagnose --active` (the report JSON; host memory, PCIe, HBM, matmul, all-reduce);
3. nvml_capture     a real NVML capture, redacted of UUIDs and serials, saved as a test fixture under
                    tests/fixtures/nvml/ (commit it) and copied into OUT_DIR;
4. triton_attention tests/test_triton_attention.py and benchmarks/baseline_triton_attention.py (Triton
                    FlashAttention prefill against torch SDPA);
5. engine_roofline  `triage baseline --device cuda --rows roofline`: the CUDA reference engine's decode
                    against its memory roofline;
6. quant_weights    benchmarks/gpu_quant.py: FP8 weights through torch._scaled_mm (compute capability 8.9+)
                    and INT4 through the Triton kernel, against bf16 at decode and prefill shapes.

Without a CUDA GPU the GPU-only steps are recorded as skipped with the reason; the others run (the gpu
tests then all skip, and `diagnose --active` measures host memory and the gloo all-reduce), so the
command itself is tested on any host. Exit status: 0 when no step failed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STEPS = ("gpu_tests", "diagnose_active", "nvml_capture", "triton_attention", "engine_roofline", "quant_weights",
         "compiled_step")


def gpu_facts() -> dict[str, Any]:
    """What this host has, from torch (without importing it here when it is absent)."""
    code = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
            "'torch_cuda': torch.version.cuda, 'cuda_available': c, 'gpus': [torch.cuda.get_device_name(i) "
            "for i in range(torch.cuda.device_count())] if c else []}))")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, json.JSONDecodeError, IndexError, OSError) as e:
        return {"torch": None, "cuda_available": False, "gpus": [], "error": f"{type(e).__name__}: {e}"}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in os.environ.get(
        "PYTHONPATH", "").split(os.pathsep) if p])}


def run(cmd: list[str], log: Path, timeout_s: float) -> tuple[int | None, float, str]:
    """(exit status or None on timeout, seconds, last lines of output); the full output goes to `log`."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO, env=_env())
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = None, f"{e.stdout or ''}{e.stderr or ''}\n[timed out after {timeout_s:.0f} s]"
        text = text if isinstance(text, str) else text.decode(errors="replace")
    log.write_text(f"$ {' '.join(cmd)}\n{text}", encoding="utf-8")
    return rc, round(time.perf_counter() - t0, 2), "\n".join(text.strip().splitlines()[-8:])


def step_gpu_tests(out: Path, facts: dict) -> dict:
    xml = out / "gpu_tests.xml"
    rc, dt, tail = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                        f"--junitxml={xml}", "tests"], out / "gpu_tests.log", 1800)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if xml.is_file():
        root = ET.parse(xml).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        if suite is not None:
            counts = {k: int(suite.get(k, 0)) for k in counts}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    failed = rc not in (0, 5) or counts["failures"] or counts["errors"]
    status = "failed" if failed else ("ok" if facts["cuda_available"] else "skipped")
    reason = None if facts["cuda_available"] else "no CUDA GPU: every @pytest.mark.gpu test skips"
    return {"status": status, "reason": reason, "duration_s": dt, "figures": counts, "files": [xml.name],
            "tail": tail if failed else None}


def step_diagnose_active(out: Path, facts: dict) -> dict:
    report = out / "diagnose_active.json"
    rc, dt, tail = run([sys.executable, "-m", "triage", "--no-color", "diagnose", "--active", "--no-discover",
                        "--window-s", "1", "--json", str(report)], out / "diagnose_active.log", 600)
    figures: dict[str, Any] = {}
    if report.is_file():
        body = json.loads(report.read_text())
        for p in body.get("probes", []):
            if p["name"] in ("host_memory", "pcie", "hbm", "matmul", "allreduce"):
                figures[p["name"]] = {"status": p["status"], "reason": p.get("reason"),
                                      **_headline(p["name"], p.get("data") or {})}
        figures["findings"] = [f["code"] for f in body.get("findings", [])]
    ok = rc == 0 and report.is_file()
    return {"status": "ok" if ok else "failed", "reason": None if ok else f"exit status {rc}", "duration_s": dt,
            "figures": figures, "files": [report.name] if report.is_file() else [], "tail": None if ok else tail}


def _headline(name: str, d: dict) -> dict:
    if name == "host_memory":
        return {k: d.get(k) for k in ("copy_bandwidth_gbps", "read_bandwidth_gbps", "num_threads", "buffer_bytes")}
    if name == "allreduce":
        return {b: (d.get(b) or {}).get("busbw_gbps") for b in ("gloo", "nccl")}
    keys = {"pcie": ("h2d_pinned_gbps", "d2h_pinned_gbps", "h2d_pageable_gbps", "d2h_pageable_gbps",
                     "link_theoretical_gbps", "h2d_pinned_share"),
            "hbm": ("copy_bandwidth_gbps", "spec_bandwidth_gbps", "share_of_spec"),
            "matmul": ("bf16_tflops", "bf16_spec_tflops", "bf16_share_of_spec", "fp8_tflops", "fp8_spec_tflops")}[name]
    return {"gpus": [{"index": g.get("index"), "name": g.get("name"), **{k: g.get(k) for k in keys}}
                     for g in d.get("gpus") or []]}


def step_nvml_capture(out: Path, facts: dict, fixture_dir: Path) -> dict:
    if not facts["cuda_available"]:
        return {"status": "skipped", "reason": "no CUDA GPU: nothing for NVML to capture", "files": []}
    name = re.sub(r"[^a-z0-9]+", "_", (facts["gpus"][0] if facts["gpus"] else "gpu").lower()).strip("_")
    fixture = fixture_dir / f"captured_{name}_x{len(facts['gpus'])}.json"
    rc, dt, tail = run([sys.executable, "-m", "tests.fixtures.nvml.capture", "--out", str(fixture)],
                       out / "nvml_capture.log", 120)
    if rc != 0 or not fixture.is_file():
        return {"status": "failed", "reason": f"exit status {rc}", "duration_s": dt, "tail": tail, "files": []}
    shutil.copy(fixture, out / fixture.name)
    return {"status": "ok", "reason": None, "duration_s": dt, "files": [fixture.name],
            "fixture": str(fixture.relative_to(REPO)) if fixture.is_relative_to(REPO) else str(fixture)}


def step_triton(out: Path, facts: dict) -> dict:
    if not facts["cuda_available"]:
        return {"status": "skipped", "reason": "no CUDA GPU: the Triton kernels are timed against SDPA on a GPU "
                                               "(tests/test_triton_attention.py runs them on CPU in `make test`)",
                "files": []}
    rc1, dt1, tail1 = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_triton_attention.py"], out / "triton_tests.log", 1200)
    bench = out / "baseline_triton_attention.json"
    rc2, dt2, tail2 = run([sys.executable, "benchmarks/baseline_triton_attention.py", "--out", str(bench)],
                          out / "triton_bench.log", 1200)
    figures = json.loads(bench.read_text()) if bench.is_file() else {}
    ok = rc1 == 0 and rc2 == 0
    return {"status": "ok" if ok else "failed", "reason": None if ok else f"tests {rc1}, benchmark {rc2}",
            "duration_s": round(dt1 + dt2, 2), "figures": figures, "files": [bench.name] if bench.is_file() else [],
            "tail": None if ok else (tail1 if rc1 else tail2)}


def step_engine_roofline(out: Path, facts: dict) -> dict:
    if not facts["cuda_available"]:
        return {"status": "skipped", "reason": "no CUDA GPU: the CUDA reference engine's roofline needs one",
                "files": []}
    report = out / "engine_roofline.json"
    rc, dt, tail = run([sys.executable, "-m", "triage", "--no-color", "baseline", "--device", "cuda", "--rows",
                        "roofline", "--json", str(report)], out / "engine_roofline.log", 1800)
    figures = {}
    if report.is_file():
        section = json.loads(report.read_text()).get("baseline") or {}
        figures = {"roofline": section.get("roofline"), "microbench": section.get("microbench")}
    ok = rc == 0 and report.is_file()
    return {"status": "ok" if ok else "failed", "reason": None if ok else f"exit status {rc}", "duration_s": dt,
            "figures": figures, "files": [report.name] if report.is_file() else [], "tail": None if ok else tail}


def step_quant_weights(out: Path, facts: dict) -> dict:
    if not facts["cuda_available"]:
        return {"status": "skipped", "reason": "no CUDA GPU: FP8 (torch._scaled_mm) and the Triton INT4 kernel are "
                                               "timed on a GPU (tests/test_quant_kernels.py interprets the Triton "
                                               "kernel on CPU)", "files": []}
    bench = out / "gpu_quant.json"
    rc, dt, tail = run([sys.executable, "benchmarks/gpu_quant.py", "--out", str(bench)], out / "gpu_quant.log", 900)
    figures = json.loads(bench.read_text()) if bench.is_file() else {}
    ok = rc == 0 and bench.is_file()
    return {"status": "ok" if ok else "failed", "reason": None if ok else f"exit status {rc}", "duration_s": dt,
            "figures": figures, "files": [bench.name] if bench.is_file() else [], "tail": None if ok else tail}


def step_compiled_step(out: Path, facts: dict) -> dict:
    """The reference engine's decode step eager against torch.compile with CUDA graphs (the baseline's compile row:
    tok/s at bs=1 and bs=8, compile seconds with a cold and a warm cache)."""
    if not facts["cuda_available"]:
        return {"status": "skipped", "reason": "no CUDA GPU: the CUDA-graph path of the compiled decode step needs one "
                                               "(tests/test_compiled_step.py runs the CPU path in `make test`)",
                "files": []}
    report = out / "compiled_step.json"
    rc, dt, tail = run([sys.executable, "-m", "triage", "--no-color", "baseline", "--device", "cuda", "--rows",
                        "compile", "--json", str(report)], out / "compiled_step.log", 900)
    rows = (json.loads(report.read_text()).get("baseline") or {}).get("rows", []) if report.is_file() else []
    ok = rc == 0 and any(r["key"] == "compile" and r["status"] == "measured" for r in rows)
    return {"status": "ok" if ok else "failed", "reason": None if ok else f"exit status {rc}", "duration_s": dt,
            "figures": {"rows": rows}, "files": [report.name] if report.is_file() else [],
            "tail": None if ok else tail}


RUNNERS = {"gpu_tests": step_gpu_tests, "diagnose_active": step_diagnose_active, "triton_attention": step_triton,
           "engine_roofline": step_engine_roofline, "quant_weights": step_quant_weights,
           "compiled_step": step_compiled_step}       # nvml_capture also takes the fixture folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="folder for the JSON results (created)")
    ap.add_argument("--dry-run", action="store_true", help="record the steps as skipped; run nothing")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {', '.join(STEPS)}")
    ap.add_argument("--fixture-dir", type=Path, default=REPO / "tests" / "fixtures" / "nvml",
                    help="where the NVML capture is saved as a test fixture")
    a = ap.parse_args(argv)
    wanted = [s.strip() for s in a.steps.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(STEPS))
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    out = a.out_dir
    out.mkdir(parents=True, exist_ok=True)
    facts = {"torch": None, "cuda_available": False, "gpus": []} if a.dry_run else gpu_facts()
    started = time.time()
    steps: dict[str, dict] = {}
    for name in STEPS:
        if name not in wanted:
            continue
        if a.dry_run:
            steps[name] = {"status": "skipped", "reason": "dry run", "files": []}
        elif name == "nvml_capture":
            steps[name] = step_nvml_capture(out, facts, a.fixture_dir)
        else:
            steps[name] = RUNNERS[name](out, facts)
        sys.stderr.write(f"{name}: {steps[name]['status']}"
                         + (f" ({steps[name]['reason']})" if steps[name].get("reason") else "") + "\n")
    summary = {
        "name": "gpu_validation", "started_unix_s": round(started, 1), "duration_s": round(time.time() - started, 1),
        "dry_run": a.dry_run, "host": {"platform": platform.platform(), "python": platform.python_version(),
                                       "cpu_count": os.cpu_count(), **facts},
        "steps": steps,
        "note": None if facts["cuda_available"] else (
            "no CUDA GPU on this host: the GPU steps were skipped; run this on a GPU host and commit the NVML "
            "fixture and these figures"),
    }
    (out / "gpu_validation.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v["status"] for k, v in steps.items()}))
    return 1 if any(s["status"] == "failed" for s in steps.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
