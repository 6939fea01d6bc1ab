"""The `diagnose --active` healthy measurements, as JSON (tests/test_active.py reads them). The cases live in
tests/rule_cases/ (gpu004.py, gpu010.py, gpu014.py, gpu015.py, mem003.py), built from
tests/rule_cases/_active.py's typed payloads."""
from __future__ import annotations

from typing import Any

from tests.rule_cases import _active


def healthy_active() -> dict[str, dict[str, Any]]:
    return {name: payload.to_dict() for name, payload in _active.healthy_active().items()}
