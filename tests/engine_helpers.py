"""Helpers shared by the engine test modules."""
from __future__ import annotations

import time

import pytest
import torch

from triage.core.errors import EngineError
from triage.reference_engine.engine.llm_engine import LLMEngine
from triage.reference_engine.engine.sequence import Sequence
from triage.reference_engine.layers.sampling_params import SamplingParams


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny matmuls on a shared 2-core box are dominated by OpenMP barrier waits; one intra-op thread
    is ~20x faster (reference_engine/host/threads.py). Restores the previous count afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def fork_request(engine: LLMEngine, parent_id: str, child_id: str, params: SamplingParams | None = None) -> None:
    """Start ``child_id`` as a copy of a live request (parallel sampling, beam-style branching), to
    exercise the allocators' fork and copy-on-write. The child shares the parent's KV blocks; the first
    write into a shared, partly filled block copies it, so neither branch ever sees the other's tokens."""
    parent = engine._seqs.get(parent_id)
    if parent is None:
        raise EngineError(f"cannot fork {parent_id!r}: no such unfinished request")
    if child_id in engine._seqs:
        raise EngineError(f"request id {child_id!r} is already in use")
    params = parent.params if params is None else params
    params.validate()
    child = Sequence(child_id, parent.prompt_token_ids, params, time.monotonic())
    child.token_ids = list(parent.token_ids)
    child.detok = parent.detok.clone()
    child.num_cached_tokens = parent.num_cached_tokens
    if params.seed is not None:
        engine._generators[child_id] = torch.Generator().manual_seed(params.seed)
    engine._seqs[child_id] = child
    if parent in engine.scheduler.running and parent.block_table:
        engine.allocator.fork(parent, child)
        engine.scheduler.adopt_running(child)
    else:
        engine.scheduler.add(child)
