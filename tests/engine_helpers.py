"""Helpers shared by the engine test modules."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny matmuls on a shared 2-core box are dominated by OpenMP barrier waits; one intra-op thread
    is ~20x faster (reference_engine/host/threads.py). Restores the previous count afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
