"""KV cache bookkeeping: which physical blocks hold which sequence's keys and values. Torch-free.

Two allocators share one interface so that the scheduler does not care which it has:

* ``BlockManager`` - the paged cache. A free pool (LRU order), reference counts, on-demand
  allocation one block at a time, chained-hash prefix caching over *full* blocks (a hit is verified
  against the stored token ids, so a hash collision can never serve the wrong KV), and copy-on-write
  when a forked sequence writes into a block it shares.
* ``ContiguousAllocator`` - the "before": every sequence reserves ``max_model_len`` token slots when
  it is admitted, used or not. It reports reserved versus used so the waste is visible.

Both hand out *block ids*; the runner turns (block id, offset) into a cache slot. Copy operations
(source block, destination block) that the runner must perform before the next forward pass are
queued in ``pending_copies``.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sized
from dataclasses import dataclass

from triage.reference_engine.engine.sequence import Sequence


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class AllocatorStats:
    num_blocks_total: int
    num_blocks_free: int
    num_blocks_used: int
    num_blocks_cached_free: int       # free, but still holding reusable prefix-cache content
    usage_frac: float
    tokens_reserved: int              # token slots in used blocks
    tokens_used: int                  # token slots actually holding a sequence's tokens
    fragmentation_frac: float         # 1 - used / reserved (internal waste of the allocated slots)


@dataclass(slots=True)
class Block:
    block_id: int
    ref_count: int = 0
    block_hash: int | None = None
    token_ids: tuple[int, ...] | None = None


def chain_hash(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
    """Hash of a full block given the hash of the block before it: equal hashes mean equal prefixes
    (up to collisions, which lookups rule out by comparing token ids)."""
    return hash((parent_hash, token_ids))


class _BlockPool:
    """What both allocators share: a pool of ``num_blocks_total`` blocks, ``_free`` the free ones."""

    num_blocks_total: int
    _free: Sized

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def usage_frac(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks_total


class BlockManager(_BlockPool):
    """Paged KV allocator with prefix caching and copy-on-write."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks_total = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self._free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self._hash_to_block: dict[int, int] = {}
        self._seq_hashes: dict[str, list[int]] = {}
        self._live: dict[str, Sequence] = {}
        self.pending_copies: list[tuple[int, int]] = []

    # -- queries -------------------------------------------------------------------------------
    def get_computed_blocks(self, seq: Sequence) -> list[int]:
        """Leading full blocks of ``seq`` whose KV is already cached. At least one token is always
        left to compute, so the model produces logits for the last one."""
        if not self.enable_prefix_caching or seq.block_table:
            return []
        bs = self.block_size
        max_hit_blocks = (seq.num_tokens - 1) // bs
        hits: list[int] = []
        parent: int | None = None
        for i in range(max_hit_blocks):
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = chain_hash(parent, tokens)
            block_id = self._hash_to_block.get(h)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
            parent = h
        return hits

    # -- allocation ----------------------------------------------------------------------------
    def _num_needed(self, seq: Sequence, num_new_tokens: int, computed_blocks: list[int]) -> int:
        total_tokens = seq.num_computed_tokens + len(computed_blocks) * self.block_size + num_new_tokens
        needed = _cdiv(total_tokens, self.block_size) - len(seq.block_table) - len(computed_blocks)
        if self._needs_cow(seq, num_new_tokens):
            needed += 1
        return max(needed, 0)

    def _needs_cow(self, seq: Sequence, num_new_tokens: int) -> bool:
        if not seq.block_table or num_new_tokens == 0 or seq.num_computed_tokens % self.block_size == 0:
            return False
        last = seq.block_table[seq.num_computed_tokens // self.block_size]
        return self.blocks[last].ref_count > 1

    def can_allocate(self, seq: Sequence, num_new_tokens: int, computed_blocks: list[int] = ()) -> bool:
        computed_blocks = list(computed_blocks)
        reclaimed = sum(1 for b in computed_blocks if self.blocks[b].ref_count == 0)
        return self._num_needed(seq, num_new_tokens, computed_blocks) <= len(self._free) - reclaimed

    def allocate_slots(self, seq: Sequence, num_new_tokens: int, computed_blocks: list[int] = ()) -> bool:
        """Make room for ``num_new_tokens`` more tokens of KV after ``seq.num_computed_tokens`` (plus
        any prefix-cache ``computed_blocks`` being attached on first schedule). All or nothing."""
        computed_blocks = list(computed_blocks)
        if not self.can_allocate(seq, num_new_tokens, computed_blocks):
            return False
        for block_id in computed_blocks:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self._free[block_id]
            block.ref_count += 1
            seq.block_table.append(block_id)
        if computed_blocks:
            self._seq_hashes[seq.request_id] = [self.blocks[b].block_hash for b in computed_blocks]
        if self._needs_cow(seq, num_new_tokens):
            idx = seq.num_computed_tokens // self.block_size
            shared = seq.block_table[idx]
            fresh = self._pop_free()
            self.blocks[shared].ref_count -= 1
            seq.block_table[idx] = fresh
            self.pending_copies.append((shared, fresh))
        total_tokens = seq.num_computed_tokens + num_new_tokens + len(computed_blocks) * self.block_size
        while len(seq.block_table) < _cdiv(total_tokens, self.block_size):
            seq.block_table.append(self._pop_free())
        self._live[seq.request_id] = seq
        return True

    def _pop_free(self) -> int:
        block_id, _ = self._free.popitem(last=False)
        block = self.blocks[block_id]
        if block.block_hash is not None:          # evict its prefix-cache entry
            if self._hash_to_block.get(block.block_hash) == block_id:
                del self._hash_to_block[block.block_hash]
            block.block_hash = None
            block.token_ids = None
        block.ref_count = 1
        return block_id

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Register blocks that have become full of computed KV, so later requests can reuse them."""
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        hashes = self._seq_hashes.setdefault(seq.request_id, [])
        num_full = min(seq.num_computed_tokens // bs, len(seq.block_table))
        while len(hashes) < num_full:
            i = len(hashes)
            tokens = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = chain_hash(hashes[-1] if hashes else None, tokens)
            hashes.append(h)
            block = self.blocks[seq.block_table[i]]
            if block.block_hash is None and h not in self._hash_to_block:
                block.block_hash = h
                block.token_ids = tokens
                self._hash_to_block[h] = block.block_id

    def free(self, seq: Sequence) -> None:
        """Drop the sequence's references. Blocks that reach zero go back to the pool; those holding
        cached prefixes go to the back (evicted last), the others to the front (reused first)."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count < 0:
                raise RuntimeError(f"block {block_id} freed more times than allocated")
            if block.ref_count == 0:
                self._free[block_id] = None
                if block.block_hash is None:
                    self._free.move_to_end(block_id, last=False)
        seq.block_table = []
        self._seq_hashes.pop(seq.request_id, None)
        self._live.pop(seq.request_id, None)

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Child shares every block of the parent (ref counts go up); the first write into a shared,
        partly filled block copies it first (copy-on-write)."""
        child.block_table = list(parent.block_table)
        for block_id in child.block_table:
            self.blocks[block_id].ref_count += 1
        child.num_computed_tokens = parent.num_computed_tokens
        self._seq_hashes[child.request_id] = list(self._seq_hashes.get(parent.request_id, []))
        self._live[child.request_id] = child

    def take_pending_copies(self) -> list[tuple[int, int]]:
        copies, self.pending_copies = self.pending_copies, []
        return copies

    # -- stats ---------------------------------------------------------------------------------
    def stats(self) -> AllocatorStats:
        """O(sequences), not O(blocks): a block before a sequence's last token is full by definition,
        so only each sequence's partly filled and not-yet-filled blocks need looking at. (While a fork
        shares a partly filled block, the fuller view of it may be undercounted until the copy.)"""
        bs = self.block_size
        partial: dict[int, int] = {}                 # block id -> tokens in it, for blocks not full
        for seq in self._live.values():
            table = seq.block_table
            for i in range(min(seq.num_tokens // bs, len(table)), len(table)):
                n = max(0, seq.num_tokens - i * bs)
                partial[table[i]] = max(partial.get(table[i], 0), n)
        used_blocks = self.num_blocks_total - len(self._free)
        reserved = used_blocks * bs
        used = (used_blocks - len(partial)) * bs + sum(partial.values())
        cached_free = self._num_cached_free()
        return AllocatorStats(
            num_blocks_total=self.num_blocks_total, num_blocks_free=len(self._free),
            num_blocks_used=used_blocks, num_blocks_cached_free=cached_free,
            usage_frac=self.usage_frac, tokens_reserved=reserved, tokens_used=used,
            fragmentation_frac=(1.0 - used / reserved) if reserved else 0.0)

    def _num_cached_free(self) -> int:
        # Free blocks that still hold a prefix-cache entry: every hashed block is either held or free.
        held_hashed = sum(1 for b in self._hash_to_block.values() if self.blocks[b].ref_count > 0)
        return len(self._hash_to_block) - held_hashed

    def check_invariants(self) -> None:
        """Raise RuntimeError if the books do not balance: ref counts vs holders, pool vs ref counts, hashes."""
        counts: dict[int, int] = {}
        for seq in self._live.values():
            for block_id in seq.block_table:
                counts[block_id] = counts.get(block_id, 0) + 1
        for block in self.blocks:
            expected = counts.get(block.block_id, 0)
            if block.ref_count != expected:
                raise RuntimeError(f"block {block.block_id}: ref_count {block.ref_count} != {expected} holders")
            if (block.ref_count == 0) != (block.block_id in self._free):
                raise RuntimeError(f"block {block.block_id}: free-pool membership disagrees with ref_count")
        for h, block_id in self._hash_to_block.items():
            if self.blocks[block_id].block_hash != h:
                raise RuntimeError(f"hash table points at block {block_id} whose hash differs")


class ContiguousAllocator(_BlockPool):
    """The "before" layout: one slot of ``max_model_len`` tokens per sequence, reserved on admission.

    It presents each slot as a single block of size ``max_model_len`` so the runner and attention
    backends treat it exactly like the paged cache with a one-entry block table.
    """

    enable_prefix_caching = False

    def __init__(self, num_slots: int, max_model_len: int):
        if num_slots < 1:
            raise ValueError("num_slots must be positive")
        self.num_blocks_total = num_slots
        self.block_size = max_model_len
        self._free: list[int] = list(range(num_slots - 1, -1, -1))
        self._live: dict[str, Sequence] = {}
        self.pending_copies: list[tuple[int, int]] = []

    def get_computed_blocks(self, seq: Sequence) -> list[int]:
        return []

    def can_allocate(self, seq: Sequence, num_new_tokens: int, computed_blocks: list[int] = ()) -> bool:
        return bool(seq.block_table) or bool(self._free)

    def allocate_slots(self, seq: Sequence, num_new_tokens: int, computed_blocks: list[int] = ()) -> bool:
        if seq.block_table:
            return seq.num_computed_tokens + num_new_tokens <= self.block_size
        if not self._free:
            return False
        seq.block_table = [self._free.pop()]
        self._live[seq.request_id] = seq
        return True

    def cache_full_blocks(self, seq: Sequence) -> None:
        return None

    def free(self, seq: Sequence) -> None:
        if seq.block_table:
            self._free.append(seq.block_table[0])
        seq.block_table = []
        self._live.pop(seq.request_id, None)

    def fork(self, parent: Sequence, child: Sequence) -> None:
        if not self._free:
            raise RuntimeError("no free slot to fork into")
        slot = self._free.pop()
        child.block_table = [slot]
        child.num_computed_tokens = parent.num_computed_tokens
        self.pending_copies.append((parent.block_table[0], slot))
        self._live[child.request_id] = child

    def take_pending_copies(self) -> list[tuple[int, int]]:
        copies, self.pending_copies = self.pending_copies, []
        return copies

    def stats(self) -> AllocatorStats:
        used_slots = self.num_blocks_total - len(self._free)
        reserved = used_slots * self.block_size
        used = sum(min(s.num_tokens, self.block_size) for s in self._live.values())
        return AllocatorStats(
            num_blocks_total=self.num_blocks_total, num_blocks_free=len(self._free),
            num_blocks_used=used_slots, num_blocks_cached_free=0, usage_frac=self.usage_frac,
            tokens_reserved=reserved, tokens_used=used,
            fragmentation_frac=(1.0 - used / reserved) if reserved else 0.0)

    def check_invariants(self) -> None:
        held = [s.block_table[0] for s in self._live.values() if s.block_table]
        if len(set(held)) != len(held) or set(held) & set(self._free):
            raise RuntimeError("a slot is held twice or is both held and free")
        if len(held) + len(self._free) != self.num_blocks_total:
            raise RuntimeError("slots leaked")
