"""A real Prometheus on loopback for tests (Debian's `prometheus` package: on PATH, or unpacked into
.venv/opt/prometheus by `make test`'s bootstrap). Tests that need it skip with the reason when it is missing."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

_SEARCH = os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.prefix) / "opt" / "prometheus" / "usr" / "bin")])
PROMETHEUS = shutil.which("prometheus", path=_SEARCH)
PROMTOOL = shutil.which("promtool", path=_SEARCH)
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package "
                                    "'prometheus'; `make test` unpacks it where apt-get is usable)")
needs_prometheus = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                      reason="prometheus is not installed (Debian package 'prometheus'; "
                                             "`make test` unpacks it where apt-get is usable)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def prometheus(tmp: Path, scrape_targets: list[str] = (), storage: Path | None = None,
               scrape_interval_s: float = 1.0, retention: str = "30d") -> Iterator[str]:
    """Start prometheus on 127.0.0.1 (scraping `scrape_targets`, host:port) and yield its base URL."""
    every = f"{round(scrape_interval_s * 1000)}ms"
    body: dict = {"global": {"scrape_interval": every, "evaluation_interval": every}}
    if scrape_targets:
        body["scrape_configs"] = [{"job_name": "triage", "scrape_interval": every,
                                   "static_configs": [{"targets": list(scrape_targets)}]}]
    config = tmp / "prometheus.yml"
    config.write_text(yaml.safe_dump(body))
    port = free_port()
    data = storage or (tmp / "data")
    log = open(tmp / "prometheus.log", "wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.retention.time={retention}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError("prometheus exited: " + (tmp / "prometheus.log").read_text()[-2000:])
            try:
                if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready: " + (tmp / "prometheus.log").read_text()[-2000:])
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def query(url: str, expr: str, at_s: float | None = None) -> list[dict]:
    params = {"query": expr}
    if at_s is not None:
        params["time"] = str(at_s)
    body = httpx.get(url + "/api/v1/query", params=params, timeout=10).json()
    assert body["status"] == "success", body
    return body["data"]["result"]
