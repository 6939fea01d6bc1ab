"""Shared test fixtures: schema validation, GPU skipping, and report factories."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from triage.core.report_io import load_schema, to_dict

REPO = Path(__file__).resolve().parent.parent


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA torch; none on this host")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def report_validator():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())

    def validate(report_or_dict):
        data = report_or_dict if isinstance(report_or_dict, dict) else to_dict(report_or_dict)
        # Through real JSON, as a consumer would read it.
        data = json.loads(json.dumps(data))
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
        return data

    return validate


from tests.live_engines import transformers_server  # noqa: E402, F401
from tests.live_llamacpp import (  # noqa: E402, F401
    llama_server_parallel1,
    llama_server_parallel4,
    llama_server_silent,
)
from tests.server_fixture import reference_server  # noqa: E402, F401


@pytest.fixture
def python_sigint_handler():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test's duration. A test process started in the
    background by a non-interactive shell inherits SIGINT ignored, and then `_thread.interrupt_main()` and a
    real Ctrl-C do nothing; a test that relies on Ctrl-C sets the state it needs, and puts the old one back."""
    import signal

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.fixture()
def torch_not_installed(monkeypatch):
    """As if the `engine` extra's torch were not installed (what triage.core.extras asks: its distribution)."""
    from importlib import metadata

    real = metadata.version

    def version(name):
        if name == "torch":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
