"""Property test: BlockManager + ContinuousScheduler books balance over random add/step/abort runs."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.reference_engine.engine.block_manager import BlockManager
from triage.reference_engine.engine.scheduler import ContinuousScheduler
from triage.reference_engine.engine.sequence import Sequence
from triage.reference_engine.layers.sampling_params import SamplingParams

PREFIXES = [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9], [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]]

op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 2), st.integers(0, 12), st.integers(1, 12)),
    st.tuples(st.just("step"), st.integers(1, 3), st.just(0), st.just(0)),
    st.tuples(st.just("abort"), st.integers(0, 50), st.just(0), st.just(0)),
)


def _tokens_used_brute_force(bm: BlockManager, sched: ContinuousScheduler) -> int:
    filled: dict[int, int] = {}
    for seq in sched.running:
        for i, block_id in enumerate(seq.block_table):
            n = min(bm.block_size, max(0, seq.num_tokens - i * bm.block_size))
            filled[block_id] = max(filled.get(block_id, 0), n)
    return sum(filled.values())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=50, max_size=50), num_blocks=st.integers(10, 24),
       prefix_caching=st.booleans(), budget=st.integers(1, 16))
def test_books_balance(ops, num_blocks, prefix_caching, budget):
    bm = BlockManager(num_blocks, block_size=4, enable_prefix_caching=prefix_caching)
    sched = ContinuousScheduler(bm, max_num_seqs=6, max_num_batched_tokens=budget)
    live: list[Sequence] = []
    n = 0
    for kind, a, b, c in ops:
        if kind == "add":
            # Prompt + max_tokens never exceeds the cache, as the engine guarantees on add_request.
            prompt = (PREFIXES[a] + list(range(100, 100 + b)))[: num_blocks * 4 - c]
            seq = Sequence(f"s{n}", prompt, SamplingParams(max_tokens=c), arrival_s=0.0)
            n += 1
            sched.add(seq)
            live.append(seq)
        elif kind == "step":
            for _ in range(a):
                batch = sched.schedule()
                for seq in sched.update_after_step(batch):
                    seq.append_token(3 + seq.num_tokens % 2)
                    if seq.num_output_tokens >= seq.params.max_tokens:
                        sched.finish(seq, "length")
                        live.remove(seq)
        elif live:
            seq = live.pop(a % len(live))
            sched.finish(seq, "abort")
        bm.check_invariants()                       # ref counts == holders; free pool == ref 0
        s = bm.stats()
        assert s.num_blocks_free + s.num_blocks_used == num_blocks
        assert s.tokens_used == _tokens_used_brute_force(bm, sched)
        assert s.num_blocks_cached_free == sum(1 for b in bm.blocks if b.ref_count == 0 and b.block_hash is not None)
        assert all(seq.block_table == [] for seq in sched.waiting)
    for seq in list(live):
        sched.finish(seq, "abort")
    assert all(block.ref_count == 0 for block in bm.blocks)
    assert bm.num_free_blocks == num_blocks
    assert not sched.has_unfinished()
