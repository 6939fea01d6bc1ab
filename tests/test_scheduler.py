"""Scheduler policies, driven without a model: the 'model' just marks tokens computed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from triage.reference_engine.engine.block_manager import BlockManager, ContiguousAllocator
from triage.reference_engine.engine.scheduler import ContinuousScheduler, StaticScheduler
from triage.reference_engine.engine.sequence import Sequence, SequenceStatus
from triage.reference_engine.layers.sampling_params import SamplingParams

REPO = Path(__file__).resolve().parent.parent


def _seq(rid: str, n_prompt: int, max_tokens: int = 4) -> Sequence:
    return Sequence(rid, list(range(1, n_prompt + 1)), SamplingParams(max_tokens=max_tokens), arrival_s=0.0)


def _fake_step(sched, batch) -> list[Sequence]:
    """Complete the batch, sample token 7 for ready sequences, finish those at max_tokens."""
    ready = sched.update_after_step(batch)
    for seq in ready:
        already_done = seq.is_finished
        seq.append_token(7)
        if not already_done and seq.num_output_tokens >= seq.params.max_tokens:
            sched.finish(seq, "length")
    return ready


def test_chunked_prefill_rides_along_with_decodes():
    bm = BlockManager(64, 4, enable_prefix_caching=False)   # b shares a's first block otherwise
    sched = ContinuousScheduler(bm, max_num_seqs=8, max_num_batched_tokens=10)
    a = _seq("a", 6)
    sched.add(a)
    batch = sched.schedule()
    assert [(s.request_id, n) for s, n in batch.entries] == [("a", 6)]
    _fake_step(sched, batch)
    b = _seq("b", 25)
    sched.add(b)
    batch = sched.schedule()
    # a decodes (1 token), b gets the remaining 9 tokens of budget as its first chunk.
    assert [(s.request_id, n) for s, n in batch.entries] == [("a", 1), ("b", 9)]
    assert (batch.num_decode_tokens, batch.num_prefill_tokens) == (1, 9)
    _fake_step(sched, batch)
    assert b.num_computed_tokens == 9 and b.num_output_tokens == 0
    batch = sched.schedule()
    assert [(s.request_id, n) for s, n in batch.entries] == [("a", 1), ("b", 9)]
    _fake_step(sched, batch)
    batch = sched.schedule()
    assert [(s.request_id, n) for s, n in batch.entries] == [("a", 1), ("b", 7)]
    ready = _fake_step(sched, batch)
    assert b in ready and b.num_output_tokens == 1


def test_without_chunked_prefill_a_long_prompt_waits_for_budget():
    sched = ContinuousScheduler(BlockManager(64, 4), max_num_seqs=8, max_num_batched_tokens=10,
                                enable_chunked_prefill=False)
    sched.add(_seq("a", 8))
    sched.add(_seq("b", 5))
    batch = sched.schedule()
    assert [s.request_id for s, _ in batch.entries] == ["a"]     # b does not fit after a: FCFS, wait


def test_max_num_seqs_caps_running():
    sched = ContinuousScheduler(BlockManager(64, 4), max_num_seqs=2, max_num_batched_tokens=100)
    for i in range(4):
        sched.add(_seq(f"r{i}", 3))
    batch = sched.schedule()
    assert len(batch.entries) == 2 and len(sched.waiting) == 2


def test_preemption_frees_the_newest_and_requeues_it_first():
    bm = BlockManager(5, 4)                        # 20 token slots
    sched = ContinuousScheduler(bm, max_num_seqs=8, max_num_batched_tokens=100)
    a, b = _seq("a", 8, max_tokens=10), _seq("b", 8, max_tokens=10)
    sched.add(a)
    sched.add(b)
    _fake_step(sched, sched.schedule())            # 4 blocks used, each has 9 tokens, 8 computed
    batch = sched.schedule()                        # both decode: a fits in block 3? needs a new block each
    assert [s.request_id for s, _ in batch.entries] == ["a"]
    assert batch.preempted == [b]
    assert b.status is SequenceStatus.WAITING and b.num_computed_tokens == 0 and b.block_table == []
    assert sched.waiting[0] is b and b.times.num_preemptions == 1
    assert sched.counters.num_preemptions_total == 1
    bm.check_invariants()


def test_static_batches_run_to_completion_before_admitting_more():
    alloc = ContiguousAllocator(num_slots=4, max_model_len=32)
    sched = StaticScheduler(alloc, max_num_seqs=2, max_num_batched_tokens=8)
    short, long_, late = _seq("s", 3, max_tokens=1), _seq("l", 20, max_tokens=5), _seq("x", 2)
    for s in (short, long_, late):
        sched.add(s)
    batch = sched.schedule()
    assert [(s.request_id, n) for s, n in batch.entries] == [("s", 3), ("l", 20)]   # whole prompts
    _fake_step(sched, batch)
    assert short.is_finished and alloc.num_free_blocks == 2      # the finished row keeps its slot
    for _ in range(4):
        batch = sched.schedule()
        # The finished request is still decoded as a padding row until the batch completes.
        assert [s.request_id for s, _ in batch.entries] == ["s", "l"]
        assert (batch.num_padding_tokens, batch.num_decode_tokens) == (1, 1)
        _fake_step(sched, batch)
    assert long_.is_finished and alloc.num_free_blocks == 4
    assert short.num_tokens == 3 + 1 + 4                          # its padding tokens were computed
    batch = sched.schedule()
    assert [s.request_id for s, _ in batch.entries] == ["x"]


def test_static_on_paged_reserves_prompt_plus_the_batch_max_tokens():
    bm = BlockManager(16, 4)
    sched = StaticScheduler(bm, max_num_seqs=4, max_num_batched_tokens=8)
    sched.add(_seq("a", 5, max_tokens=10))
    sched.add(_seq("b", 2, max_tokens=3))
    sched.schedule()
    assert bm.num_free_blocks == 16 - 4 - 3        # ceil(15 / 4) + ceil(12 / 4): b is padded to 10 tokens


def test_block_manager_and_scheduler_never_import_torch():
    code = ("import sys; import triage.reference_engine.engine.block_manager, triage.reference_engine.engine.scheduler, "
            "triage.reference_engine.models.model_config, triage.reference_engine.layers.sampling_params, triage.reference_engine.models.detokenizer, "
            "triage.reference_engine.models.tokenizer, triage.reference_engine.engine.request_outputs; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]; print(len(bad))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "0"
