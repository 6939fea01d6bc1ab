"""BlockManager / ContiguousAllocator bookkeeping, without torch or a model."""
from __future__ import annotations

import pytest

from triage.reference_engine.engine.block_manager import BlockManager, ContiguousAllocator
from triage.reference_engine.engine.sequence import Sequence
from triage.reference_engine.layers.sampling_params import SamplingParams


def _seq(rid: str, tokens: list[int], max_tokens: int = 8) -> Sequence:
    return Sequence(rid, tokens, SamplingParams(max_tokens=max_tokens), arrival_s=0.0)


def _compute(bm: BlockManager, seq: Sequence, n: int) -> None:
    """Allocate and pretend the model computed ``n`` more tokens."""
    assert bm.allocate_slots(seq, n)
    seq.num_computed_tokens += n
    bm.cache_full_blocks(seq)


def test_on_demand_allocation_and_free():
    bm = BlockManager(num_blocks=8, block_size=4)
    s = _seq("a", list(range(10)))
    _compute(bm, s, 10)
    assert len(s.block_table) == 3 and bm.num_free_blocks == 5
    for tok in (10, 11):                       # decode: the 3rd block has room for 2 more
        s.append_token(tok)
        _compute(bm, s, 1)
    assert len(s.block_table) == 3
    s.append_token(12)
    _compute(bm, s, 1)
    assert len(s.block_table) == 4 and bm.num_free_blocks == 4
    st = bm.stats()
    assert (st.num_blocks_used, st.tokens_reserved, st.tokens_used) == (4, 16, 13)
    assert st.fragmentation_frac == pytest.approx(3 / 16)
    bm.free(s)
    assert bm.num_free_blocks == 8 and s.block_table == []
    bm.check_invariants()


def test_allocation_is_all_or_nothing():
    bm = BlockManager(num_blocks=3, block_size=4)
    s = _seq("a", list(range(13)))
    assert not bm.allocate_slots(s, 13)            # needs 4 blocks
    assert s.block_table == [] and bm.num_free_blocks == 3
    assert bm.allocate_slots(s, 12)
    assert bm.num_free_blocks == 0


def test_prefix_cache_hits_full_blocks_and_keeps_one_token_to_compute():
    bm = BlockManager(num_blocks=16, block_size=4)
    a = _seq("a", list(range(12)))
    _compute(bm, a, 12)
    b = _seq("b", list(range(12)))                 # identical prompt: only 2 of 3 blocks may hit
    hits = bm.get_computed_blocks(b)
    assert hits == a.block_table[:2]
    c = _seq("c", list(range(8)) + [99, 98, 97, 96, 95])
    hits_c = bm.get_computed_blocks(c)
    assert hits_c == a.block_table[:2]
    assert bm.allocate_slots(c, 5, hits_c)
    assert c.block_table[:2] == a.block_table[:2]
    assert [bm.blocks[x].ref_count for x in c.block_table] == [2, 2, 1, 1]
    d = _seq("d", [0, 1, 2, 7, 4, 5, 6, 7, 8])     # first block differs: the chain breaks at once
    assert bm.get_computed_blocks(d) == []
    bm.check_invariants()


def test_freed_cached_blocks_stay_reusable_until_evicted():
    bm = BlockManager(num_blocks=4, block_size=2)
    a = _seq("a", [1, 2, 3, 4, 5])
    _compute(bm, a, 5)
    cached = a.block_table[:2]
    bm.free(a)
    assert bm.stats().num_blocks_cached_free == 2
    b = _seq("b", [1, 2, 3, 4, 9])
    assert bm.get_computed_blocks(b) == cached
    # Uncached free blocks are handed out before cached ones are evicted.
    e = _seq("e", [7, 7])
    assert bm.allocate_slots(e, 2)
    assert e.block_table[0] not in cached
    f = _seq("f", [8, 8, 8, 8, 8, 8])
    assert bm.allocate_slots(f, 6)                 # now the cached blocks must be evicted
    assert bm.get_computed_blocks(_seq("g", [1, 2, 3, 4, 9])) == []


def test_hash_collision_is_caught_by_token_verification(monkeypatch):
    import triage.reference_engine.engine.block_manager as mod

    monkeypatch.setattr(mod, "chain_hash", lambda parent, tokens: 42)   # every block collides
    bm = mod.BlockManager(num_blocks=8, block_size=2)
    a = _seq("a", [1, 2, 3])
    _compute(bm, a, 3)
    assert bm.get_computed_blocks(_seq("b", [5, 6, 7])) == []
    assert bm.get_computed_blocks(_seq("c", [1, 2, 9])) == [a.block_table[0]]


def test_fork_shares_blocks_and_copies_on_write():
    bm = BlockManager(num_blocks=8, block_size=4)
    parent = _seq("p", list(range(6)))
    _compute(bm, parent, 6)                         # blocks: [full, half]
    child = _seq("c", list(range(6)))
    bm.fork(parent, child)
    assert child.block_table == parent.block_table
    assert all(bm.blocks[b].ref_count == 2 for b in parent.block_table)
    assert child.num_computed_tokens == 6
    child.append_token(100)                        # will be written at position 6, in the shared half block
    assert bm.allocate_slots(child, 1)
    copies = bm.take_pending_copies()
    assert copies == [(parent.block_table[1], child.block_table[1])]
    assert child.block_table[0] == parent.block_table[0]
    assert bm.blocks[parent.block_table[0]].ref_count == 2
    assert bm.blocks[parent.block_table[1]].ref_count == 1
    parent.append_token(200)
    assert bm.allocate_slots(parent, 1)            # the parent now owns its half block alone: no copy
    assert bm.take_pending_copies() == []
    bm.free(parent)
    bm.free(child)
    assert bm.num_free_blocks == 8
    bm.check_invariants()


def test_contiguous_reserves_whole_slots():
    ca = ContiguousAllocator(num_slots=2, max_model_len=64)
    a, b, c = _seq("a", [1] * 10), _seq("b", [1] * 3), _seq("c", [1])
    assert ca.allocate_slots(a, 10) and ca.allocate_slots(b, 3)
    assert not ca.allocate_slots(c, 1)
    st = ca.stats()
    assert (st.tokens_reserved, st.tokens_used) == (128, 13)
    assert st.fragmentation_frac == pytest.approx(1 - 13 / 128)
    ca.free(a)
    assert ca.allocate_slots(c, 1)
    ca.check_invariants()

