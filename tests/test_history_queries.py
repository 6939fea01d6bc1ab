"""The PromQL behind `diagnose --prometheus`: every vLLM, SGLang and TGI metric it reads exists in that
engine's truth tables (read from its own source), and the window payload the rules read is built right."""
from __future__ import annotations

import re

import pytest

import triage.engines.truth as truth
from triage.probes.history_queries import ENGINE_MARKERS, ENGINE_QUERIES, GPU_QUERIES, render
from triage.probes.prometheus_history import probe_history

NAME = re.compile(r"\b((?:vllm|sglang):[a-z_:]+|tgi_[a-z_]+|llamacpp:[a-z_]+|DCGM_FI_[A-Z_]+)\b")


def _stored(name: str, engine: str) -> bool:
    """A name as Prometheus stores it (`_total`, `_bucket`, `_sum`) is in some tabled version's metrics."""
    known = truth.metric_names(engine)
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return name in known or base in known or name.removesuffix("_total") in known


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi"])
def test_every_metric_name_is_in_the_engines_truth_tables(engine):
    names = {n for q in ENGINE_QUERIES[engine].values() for n in NAME.findall(q)}
    names |= {m for e, markers in ENGINE_MARKERS if e == engine for m in markers}
    assert names
    missing = sorted(n for n in names if not _stored(n, engine))
    assert not missing, f"{engine}: not in any tabled version: {missing}"


def test_selectors_and_windows_are_rendered_into_every_query():
    q = render(ENGINE_QUERIES["vllm"]["ttft_p99_s"], 'instance="a"', "1h")
    assert q == ('histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{instance="a"}'
                 '[1h])))')
    assert "{" not in render(GPU_QUERIES["gpu_power_w_mean"], "", "30m").replace("{}", "")


def test_the_window_becomes_the_server_metrics_payload_and_the_comparison():
    def query(expr: str, at: float):
        if expr.startswith("count("):
            return 1.0 if "vllm:num_requests_running" in expr else None
        table = {"time_to_first_token": 1.2, "request_success": 20.0, "prompt_tokens": 20000.0,
                 "kv_cache_usage_perc": 0.97, "num_requests_waiting": 4.0}
        value = next((v for k, v in table.items() if k in expr and "queue_time" not in expr), None)
        return None if value is None else (value if at >= 50000.0 else value / 2)

    history, metrics = probe_history("http://user:secret@prom:9090", 3600.0, 86400.0, 90000.0, query=query)
    assert history.ok and metrics.ok
    assert history.data.engine == "vllm" and "secret" not in history.data.url
    assert history.data.now["prompt_tokens_per_request"] == 1000.0
    assert history.data.then["ttft_p99_s"] == pytest.approx(0.6)
    assert metrics.data.kv_cache_usage_frac_max == 0.97 and metrics.data.histograms.ttft_s.p99_s == 1.2
    assert metrics.data.num_requests_finished_delta == 20.0 * 3600
