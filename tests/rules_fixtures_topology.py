"""The topology captures' server_metrics windows (tests/test_topology.py reads them). The TOPO cases live in
tests/rule_cases/topo001.py ... topo005.py, built with tests/rule_cases/_topology.py."""
from __future__ import annotations

from tests.rule_cases._topology import CAPTURES, window

__all__ = ["CAPTURES", "window"]
