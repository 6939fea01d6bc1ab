"""The `reference_server` session fixture: one real `triage serve --model tiny` on a free loopback
port, shared by every test that needs an OpenAI-compatible server. Import it in conftest.py."""
from __future__ import annotations

import pytest

from triage.reference_engine.serve.launcher import ServerHandle, start_reference_server

# A 1 MiB body limit keeps the 413 path cheap to reach; the tiny preset starts in seconds.
REFERENCE_SERVER_ARGS = ("--max-request-body-bytes", "1048576", "--max-num-seqs", "64", "--seed", "0")


@pytest.fixture(scope="session")
def reference_server() -> ServerHandle:
    """A running reference server (tiny preset). `.url` is its base URL; no API key is required."""
    handle = start_reference_server("tiny", extra_args=REFERENCE_SERVER_ARGS, startup_timeout_s=180)
    try:
        yield handle
    finally:
        handle.stop()
