"""The bench and coldstart HTML reports: one look (triage/render/html_page.py), the sections a colleague needs,
findings with their fixes, probe errors in plain words, a coldstart timeline with a time axis; and, where a
headless Chromium is installed, a screenshot of each page that is more than a blank sheet."""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.factories import bench_report, level
from triage.bench.app import evaluate_rules
from triage.bench.saturation import summary
from triage.coldstart.view import render_html as coldstart_html
from triage.core.bench_data import BenchRunConfig
from triage.core.report import BenchSection, Certainty, ClientStats, Finding, Fix, Report, Severity, Target
from triage.render.html_bench import plain_note

ROOT = Path(__file__).resolve().parent.parent
CONFIG = BenchRunConfig(url="http://10.0.0.5:8000", model="Qwen/Qwen3-8B", endpoint="completions",
                        concurrency=(1, 4, 16, 64), request_rate=(), burstiness=1.0, num_requests=200, warmup=2,
                        repeat=1, seed=0, input_len=512, output_len=128, len_dist="fixed", shared_prefix_len=0,
                        timeout_s=60.0, max_model_len=32768, ignore_eos_sent=True,
                        notes=("NVML unavailable: NVML Shared Library Not Found",))
KV_FIX = "Raise --gpu-memory-utilization or lower --max-num-seqs so that the running batch fits in the KV cache."


def _bench() -> Report:
    levels = [level(1, [100.0, 120.0], [10.0, 11.0], [500.0, 520.0], 100.0),
              level(4, [150.0, 170.0], [12.0, 14.0], [700.0, 720.0], 300.0, failed=1),
              level(16, [300.0, 350.0], [18.0, 19.0], [800.0, 880.0], 520.0)]
    bad = ClientStats(cpu_pct=97.0, event_loop_lag_ms_p99=40.0, achieved_concurrency=50.0, valid=False,
                      invalid_reason="client CPU 97% of a core > 90%")
    levels.append(dataclasses.replace(level(64, [900.0, 990.0], [30.0, 33.0], [1500.0, 1600.0], 610.0), client=bad))
    section = BenchSection(config=CONFIG, levels=tuple(levels), summary=summary(levels))
    found, _ = evaluate_rules(section)
    kv = Finding(code="KV001", name="kv_pressure", severity=Severity.MEDIUM, certainty=Certainty.LIKELY,
                 title="KV cache nearly full at the top levels", message="KV usage peaked at 98% at c=64.",
                 evidence={"bench.c64.server.kv_cache_usage_frac_max": 0.98},
                 fix=Fix(KV_FIX, ("vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.95",)))
    report = bench_report(levels, model="Qwen/Qwen3-8B")
    return dataclasses.replace(report, bench=section, findings=(*found, kv),
                               target=Target(url=CONFIG.url, engine="vllm", engine_version="0.10.2",
                                             model="Qwen/Qwen3-8B"))


def _phase(name: str, label: str, start: float, seconds: float | None, nbytes: int | None = None) -> dict:
    return {"phase": name, "label": label, "seconds": seconds, "logged": True, "bytes": nbytes,
            "bandwidth_bytes_per_s": nbytes / seconds if nbytes and seconds else None, "started_at_s": start,
            "ended_at_s": None if seconds is None else start + seconds, "completed": seconds is not None,
            "line": None}


def _start(n: int, download: float, ready: float) -> dict:
    load_at = 6.0 + download
    phases = [_phase("process", "process start", 0.0, 6.0), _phase("download", "weight download", 6.0, download),
              _phase("weight_load", "weight load", load_at, 15.4, 16 * 2**30),
              _phase("compile", "torch.compile", load_at + 15.4, 25.3),
              _phase("kv_alloc", "memory profile / KV allocation", load_at + 40.7, 3.0),
              _phase("cuda_graph", "CUDA-graph capture", load_at + 43.7, 16.0),
              _phase("api_server", "API server up", load_at + 59.7, ready - load_at - 59.7)]
    return {"run": n, "outcome": "ready", "ready_s": ready, "ttft_s": 0.04, "first_token_s": ready + 0.04,
            "exit_code": None, "last_lines": [], "error": None,
            "startup": {"phases": phases, "phases_total_s": sum(p["seconds"] for p in phases)}}


def _coldstart() -> dict:
    argv = ["/opt/venv/bin/vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000", "--gpu-memory-utilization", "0.9"]
    return {"kind": "coldstart", "argv": argv, "engine": "vllm", "url": "http://127.0.0.1:8000", "repeat": 2,
            "timeout_s": 600.0, "runs": [_start(1, 92.5, 160.2), _start(2, 0.0, 67.4)], "interrupted": False,
            "warm_vs_first": {"first_ready_s": 160.2, "warm_ready_median_s": 67.4, "saved_s": 92.8,
                              "phases": {"download": {"first_s": 92.5, "warm_median_s": 0.0}}}}


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


@pytest.mark.slow
def test_the_bench_page_has_the_sections_a_colleague_needs():
    pytest.importorskip("matplotlib", reason="the bench page's plots are the 'html' extra")
    from triage.bench.extra_files import render_html

    report = _bench()
    page = render_html(report)
    assert "<style>" in page and "system-ui" in page and "max-width:1300px" in page
    assert re.search(r"table\{[^}]*font-size:1[5-9]px", page)
    for heading in ("Summary", "Workload &amp; config", "Results", "Findings", "Plots"):
        assert f"<h2>{heading}</h2>" in page
    workload = page[page.index("<h2>Workload"):page.index("<h2>Results")]
    assert "Qwen/Qwen3-8B" in workload and "http://10.0.0.5:8000" in workload
    assert "1, 4, 16, 64" in workload and "512 tokens" in workload and "128 tokens" in workload
    assert "vLLM 0.10.2" in page and ">vllm<" not in page and "engine <b>vllm" not in page
    assert len(report.findings) >= 3
    findings = page[page.index("<h2>Findings"):]
    for f in report.findings:
        assert f.title.replace("&", "&amp;") in findings
        assert _text(f.fix.text.replace(">", "&gt;")) in _text(findings), f.code
    assert "$ vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.95" in page
    assert "NVML Shared Library Not Found" not in page
    assert "no NVIDIA driver library on this host: GPU metrics not read" in page
    assert "client CPU 97% of a core &gt; 90%" in page
    assert page.count("data:image/png;base64,") == 4


def test_probe_errors_are_said_in_plain_words():
    assert plain_note("NVML unavailable: pynvml is not installed").startswith("GPU metrics not read")
    assert "driver is not loaded" in plain_note("NVML unavailable: Driver Not Loaded")
    assert plain_note("NVML found no GPU") == "no NVIDIA GPU found on this host: GPU metrics not read"
    assert plain_note("interrupted: 2 of 4 levels finished") == "interrupted: 2 of 4 levels finished"


def test_the_coldstart_page_has_a_timeline_with_seconds_and_an_honest_legend():
    page = coldstart_html(_coldstart())
    assert "<title>Cold start: vLLM</title>" in page and "<h1>Cold start: vLLM</h1>" in page
    assert '<pre class=cmd>$ /opt/venv/bin/vllm serve Qwen/Qwen3-8B --port 8000' in page
    assert "system-ui" in page and "seconds since launch" in page
    legend = re.search(r"<div class=legend>(.*?)</div>", page).group(1)
    assert re.findall(r'<span><i style="[^"]*"></i>([^<]+)</span>', legend) == [
        "process start", "weight download", "weight load", "torch.compile", "CUDA-graph capture",
        "memory profile / KV allocation", "API server up"]
    assert "warm-up" not in legend and "ready: the health route answers" in legend
    assert '<span class="sec in"' in page and ">92.5 s</span>" in page and ">15.4 s</span>" in page
    ticks = re.findall(r"<div class=tick [^>]*><span>([\d.]+)</span>", page)
    assert ticks[:3] == ["0", "25", "50"] and ticks[-1] == "175"          # 160.2 s to ready, shared by both starts
    assert "+92.80 s" in page


def test_an_unknown_launcher_is_titled_by_its_short_command_and_an_unfinished_phase_is_said():
    report = _coldstart()
    report.update(engine=None, argv=["/srv/bin/start-model.sh", "--fast", "--model", "x"], warm_vs_first=None)
    stuck = report["runs"][1]
    stuck.update(outcome="timeout", ready_s=None, ttft_s=None, last_lines=["still loading"])
    stuck["startup"]["phases"] = [_phase("process", "process start", 0.0, 6.0),
                                  _phase("weight_load", "weight load", 6.0, None)]
    page = coldstart_html(report)
    assert "<h1>Cold start: start-model.sh --fast --model</h1>" in page
    assert "reached at 6.00 s, not finished" in page and "still loading" in page


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _screenshot(browser: str, page: Path, png: Path) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--hide-scrollbars", "--window-size=1400,2400",
                        f"--screenshot={png}", page.resolve().as_uri()],
                       check=True, timeout=120, capture_output=True)


@pytest.mark.slow
def test_screenshots_of_both_pages_are_real_pages():
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium binary found (shutil.which('chromium'), /usr/bin/chromium): no screenshot taken")
    pytest.importorskip("matplotlib", reason="the bench page's plots are the 'html' extra")
    from triage.bench.extra_files import write_html

    out = ROOT / "out" / "html_reports"
    out.mkdir(parents=True, exist_ok=True)
    write_html(_bench(), out / "bench.html")
    (out / "coldstart.html").write_text(coldstart_html(_coldstart()), encoding="utf-8")
    for name in ("bench", "coldstart"):
        png = out / f"{name}.png"
        png.unlink(missing_ok=True)
        _screenshot(browser, out / f"{name}.html", png)
        assert png.exists() and png.stat().st_size > 20_000, f"{png}: no screenshot or a near-empty one"
        image = pytest.importorskip("matplotlib.image").imread(png)
        assert image.shape[1] == 1400 and image.std() > 0.02, f"{png}: a single colour"
