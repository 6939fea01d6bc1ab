"""triage diagnose against a real `triage serve` (the reference engine, tiny preset) on loopback."""
from __future__ import annotations

import threading

import httpx
import pytest

from triage.diagnose import DiagnoseOptions, diagnose
from triage.probes.discovery import find_serving_processes, process_for_port

launcher = pytest.importorskip("triage.reference_engine.serve.launcher")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with launcher.start_reference_server(model="tiny", extra_args=("--max-num-seqs", "4")) as handle:
        yield handle


def _load(url: str, num_requests: int) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        for i in range(num_requests):
            client.post("/v1/completions", json={"model": model, "prompt": f"hello {i} " * 8, "max_tokens": 8})


def test_the_reference_server_is_found_by_port_and_by_command_line(server):
    found = process_for_port(server.port)
    assert found is not None and found.pid == server.pid and found.engine == "reference"
    assert any(c.pid == server.pid and c.port == server.port for c in find_serving_processes())


def test_diagnose_against_triage_serve(server, report_validator):
    load = threading.Thread(target=_load, args=(server.url, 6), daemon=True)
    load.start()
    result = diagnose(DiagnoseOptions(url=server.url, window_s=2.0, bandwidth_budget_s=0.05))
    load.join(120)
    report = report_validator(result.report)
    assert result.discovery.pid == server.pid and result.discovery.engine == "reference"
    probes = {p.name: p for p in result.snapshot.probes}
    metrics = probes["server_metrics"]
    assert metrics.ok, metrics.reason
    assert metrics.data.engine == "vllm"            # the reference server speaks vLLM's metric names
    assert metrics.data.num_requests_running is not None
    config = probes["server_config"]
    assert config.ok and config.data.engine == "reference"
    assert config.data.max_num_seqs == 4 and config.data.sources["max_num_seqs"] in ("cmdline",)
    process = probes["server_process"]
    assert process.ok and process.data.pid == server.pid and process.data.processes
    assert 0 < process.data.uptime_s < 3600           # a real create time, not a placeholder
    network = probes["network"]
    assert network.ok and network.data.health_status_code == 200 and network.data.same_host is True
    assert report["target"]["engine"] == "reference"
    assert report["target"]["url"] == server.url
