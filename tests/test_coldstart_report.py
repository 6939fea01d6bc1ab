"""`triage coldstart`'s pure parts: which engine a command starts, where it serves, the warm-vs-first summary and
the views."""
from __future__ import annotations

import pytest

from triage.coldstart.run import base_url, coldstart, engine_of, warm_vs_first
from triage.coldstart.view import render_html, render_text
from triage.core.errors import UsageError


@pytest.mark.parametrize("argv,engine", [
    (["vllm", "serve", "Qwen/Qwen3-8B"], "vllm"),
    (["python", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
    (["text-generation-launcher", "--model-id", "m"], "tgi"),
    (["/opt/bin/llama-server", "-m", "x.gguf"], "llama.cpp"),
    (["/usr/bin/python3", "-m", "triage", "serve", "--port", "8000"], "reference"),
    (["./start.sh"], None),
])
def test_the_engine_comes_from_the_launch_command(argv, engine):
    found = engine_of(argv)
    assert (found.name if found else None) == engine


def test_the_url_comes_from_the_flags_and_a_wildcard_host_is_reached_on_loopback():
    assert base_url(["vllm", "serve", "m", "--host", "0.0.0.0", "--port", "8001"], None) == "http://127.0.0.1:8001"
    assert base_url(["llama-server", "--port=8080"], None) == "http://127.0.0.1:8080"
    assert base_url(["x", "--port", "0"], None) is None                     # read from its log instead
    assert base_url(["x"], "http://10.0.0.2:9000/") == "http://10.0.0.2:9000"


def _run(n: int, ready: float, load: float) -> dict:
    return {"run": n, "outcome": "ready", "ready_s": ready, "ttft_s": 0.02, "first_token_s": ready + 0.02,
            "exit_code": None, "last_lines": [], "error": None,
            "startup": {"phases": [{"phase": "weight_load", "label": "weight load", "seconds": load, "logged": True,
                                    "bytes": 2**30, "bandwidth_bytes_per_s": 2**30 / load, "started_at_s": 1.0,
                                    "ended_at_s": 1.0 + load, "completed": True, "line": None}],
                        "phases_total_s": load}}


def test_warm_starts_are_summarised_against_the_first():
    summary = warm_vs_first([_run(1, 30.0, 20.0), _run(2, 12.0, 4.0), _run(3, 10.0, 3.0)])
    assert summary["first_ready_s"] == 30.0 and summary["warm_ready_median_s"] == 11.0
    assert summary["saved_s"] == 19.0
    assert summary["phases"]["weight_load"] == {"first_s": 20.0, "warm_median_s": 3.5}
    assert warm_vs_first([_run(1, 30.0, 20.0)]) is None


def test_the_views_show_each_start_and_a_never_ready_one_with_its_last_lines():
    stuck = {**_run(2, 0.0, 5.0), "outcome": "timeout", "ready_s": None, "ttft_s": None, "last_lines": ["still here"]}
    stuck["startup"]["phases"][0].update(completed=False, seconds=None)
    report = {"argv": ["vllm", "serve", "m"], "engine": "vllm", "url": "http://127.0.0.1:8000",
              "runs": [_run(1, 30.0, 20.0), stuck], "interrupted": False, "warm_vs_first": None}
    text = render_text(report)
    assert "start 1 (cold): ready, ready in 30.00 s, first token 20 ms after ready" in text
    assert "start 2 (warm): timeout" in text and "(reached, not finished)" in text and "    still here" in text
    assert "1.0 GiB" in text and "53.7" in text                              # 2**30 bytes / 20 s in MB/s
    assert "left:3.33%" in render_html(report)                              # 1 s of the longest 30 s


def test_bad_arguments_are_usage_errors():
    with pytest.raises(UsageError, match="after `--`"):
        coldstart([])
    with pytest.raises(UsageError, match="--repeat 0"):
        coldstart(["vllm", "serve", "m"], repeat=0)
    with pytest.raises(UsageError, match="--engine 'nope'"):
        coldstart(["./x.sh"], engine_name="nope")
