"""Which sequences run in the next forward pass, and how many tokens each. Torch-free.

``ContinuousScheduler`` (vLLM-style iteration-level scheduling): every step first serves the running
sequences (decodes and unfinished prefill chunks, oldest first) and then admits waiting ones, all
under a ``max_num_batched_tokens`` budget and a ``max_num_seqs`` cap. Long prompts are split into
chunks that ride along with decodes (chunked prefill). When the KV cache runs out, the newest running
sequence is preempted: its blocks are freed and it is recomputed later (recompute preemption).

``StaticScheduler`` is the "before" (HF ``generate()``-style): it takes a batch, reserves KV for
every member's prompt plus the batch's largest max_tokens up front, and runs the batch until every
member has finished. A member that finishes early stays in the batch as a padding row: it keeps
being decoded (its tokens are thrown away), exactly the wasted compute of a padded static batch.
Only then does it look at the queue again; requests that arrive meanwhile wait. (Prompts are not
padded: the prefill is ragged, which flatters the baseline slightly.)
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from triage.reference_engine.engine.sequence import Sequence, SequenceStatus


@dataclass(slots=True)
class ScheduledBatch:
    entries: list[tuple[Sequence, int]] = field(default_factory=list)   # (sequence, num_new_tokens)
    preempted: list[Sequence] = field(default_factory=list)
    num_prefill_tokens: int = 0
    num_decode_tokens: int = 0
    num_padding_tokens: int = 0          # static batching: decode work for members that already finished

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens + self.num_padding_tokens

    @property
    def is_empty(self) -> bool:
        return not self.entries

    def add(self, seq: Sequence, num_new_tokens: int) -> None:
        self.entries.append((seq, num_new_tokens))
        if seq.is_finished:
            self.num_padding_tokens += num_new_tokens
        elif seq.num_tokens - seq.num_computed_tokens > 1:
            self.num_prefill_tokens += num_new_tokens
        else:
            self.num_decode_tokens += num_new_tokens


@dataclass(slots=True)
class SchedulerCounters:
    num_preemptions_total: int = 0
    prefix_cache_queries_total: int = 0     # tokens looked up
    prefix_cache_hits_total: int = 0        # tokens found


class _SchedulerBase:
    def __init__(self, allocator, max_num_seqs: int, max_num_batched_tokens: int,
                 enable_chunked_prefill: bool = True, clock=time.monotonic):
        self.allocator = allocator
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = SchedulerCounters()
        self.clock = clock

    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def adopt_running(self, seq: Sequence) -> None:
        """A forked sequence that already holds blocks joins the running set directly."""
        self._mark_scheduled(seq)
        self.running.append(seq)

    def finish(self, seq: Sequence, reason: str) -> None:
        """Remove a sequence from the queues and return its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.allocator.free(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        seq.times.finished_s = self.clock()

    def update_after_step(self, batch: ScheduledBatch) -> list[Sequence]:
        """Advance ``num_computed_tokens`` and register newly full blocks. Returns the sequences that
        need a sampled token (their whole context now has KV)."""
        ready = []
        for seq, num_new in batch.entries:
            seq.num_computed_tokens += num_new
            self.allocator.cache_full_blocks(seq)
            if seq.num_computed_tokens == seq.num_tokens:
                ready.append(seq)
        return ready

    def _mark_scheduled(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.RUNNING
        if seq.times.scheduled_s is None:
            seq.times.scheduled_s = self.clock()


class ContinuousScheduler(_SchedulerBase):
    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch()
        budget = self._schedule_running(batch)
        if not batch.preempted:
            self._admit_waiting(batch, budget)
        return batch

    def _schedule_running(self, batch: ScheduledBatch) -> int:
        """Running sequences first, oldest first; returns the token budget left for waiting ones."""
        budget = self.max_num_batched_tokens
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            num_new = self._fit(seq.num_tokens - seq.num_computed_tokens, budget)
            if num_new is None:
                i += 1
                continue
            if not self._allocate_or_preempt(seq, num_new, batch):
                break
            batch.add(seq, num_new)
            budget -= num_new
            i += 1
        return budget

    def _admit_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        """Admit waiting sequences in order while the cap, the budget and the KV cache allow."""
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            seq = self.waiting[0]
            computed = self.allocator.get_computed_blocks(seq)
            num_cached = len(computed) * self.allocator.block_size
            num_new = self._fit(seq.num_tokens - num_cached, budget)
            if num_new is None or not self.allocator.allocate_slots(seq, num_new, computed):
                break
            self.waiting.popleft()
            self._start(seq, num_cached)
            batch.add(seq, num_new)
            budget -= num_new

    def _fit(self, num_new: int, budget: int) -> int | None:
        """Tokens to run under ``budget``: all of them, a chunk (chunked prefill), or None if they do not fit."""
        if num_new <= budget:
            return num_new
        return budget if self.enable_chunked_prefill else None

    def _allocate_or_preempt(self, seq: Sequence, num_new: int, batch: ScheduledBatch) -> bool:
        """Make KV room for ``seq`` by preempting the newest running sequences; False if ``seq`` itself went."""
        while not self.allocator.allocate_slots(seq, num_new):
            victim = self.running.pop()
            self._preempt(victim)
            batch.preempted.append(victim)
            if victim is seq:
                return False
        return True

    def _start(self, seq: Sequence, num_cached: int) -> None:
        """An admitted sequence starts running after its ``num_cached`` prefix-cached tokens."""
        if self.allocator.enable_prefix_caching:
            self.counters.prefix_cache_queries_total += seq.num_tokens
            self.counters.prefix_cache_hits_total += num_cached
        if seq.times.scheduled_s is None:
            seq.num_cached_tokens = num_cached
        seq.num_computed_tokens = num_cached
        self._mark_scheduled(seq)
        self.running.append(seq)

    def _preempt(self, seq: Sequence) -> None:
        self.allocator.free(seq)
        seq.num_computed_tokens = 0
        seq.status = SequenceStatus.WAITING
        seq.times.num_preemptions += 1
        self.counters.num_preemptions_total += 1
        self.waiting.appendleft(seq)


class StaticScheduler(_SchedulerBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._reserved_tokens: dict[str, int] = {}

    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch()
        if not self.running:
            members: list[Sequence] = []
            while self.waiting and len(members) < self.max_num_seqs:
                seq = self.waiting[0]
                pad_to = max([seq.params.max_tokens] + [m.params.max_tokens for m in members])
                if not self.allocator.allocate_slots(seq, seq.num_prompt_tokens + pad_to):
                    break
                self.waiting.popleft()
                members.append(seq)
            batch_max_tokens = max((m.params.max_tokens for m in members), default=0)
            for seq in members:
                # Reserve what the padded batch can write, within the sequence's slot/blocks.
                self.allocator.allocate_slots(seq, seq.num_prompt_tokens + batch_max_tokens)
                capacity = len(seq.block_table) * self.allocator.block_size
                self._reserved_tokens[seq.request_id] = min(capacity, seq.num_prompt_tokens + batch_max_tokens)
                self._mark_scheduled(seq)
                self.running.append(seq)
        for seq in self.running:
            if seq.is_finished and seq.num_tokens >= self._reserved_tokens[seq.request_id]:
                continue                                  # padding row out of room: idle
            batch.add(seq, seq.num_tokens - seq.num_computed_tokens)
        return batch

    def finish(self, seq: Sequence, reason: str) -> None:
        """A member that finishes keeps its blocks and its batch row until the whole batch is done;
        an aborted one leaves at once."""
        if reason == "abort" or seq not in self.running:
            self._reserved_tokens.pop(seq.request_id, None)
            super().finish(seq, reason)
        else:
            seq.status = SequenceStatus.FINISHED
            seq.finish_reason = reason
            seq.times.finished_s = self.clock()
        if self.running and all(s.is_finished for s in self.running):
            for member in self.running:
                self.allocator.free(member)
                self._reserved_tokens.pop(member.request_id, None)
            self.running = []

    def has_unfinished(self) -> bool:
        return bool(self.waiting) or any(not s.is_finished for s in self.running)


def make_scheduler(kind: str, allocator, max_num_seqs: int, max_num_batched_tokens: int,
                   enable_chunked_prefill: bool = True):
    cls = {"continuous": ContinuousScheduler, "static": StaticScheduler}[kind]
    return cls(allocator, max_num_seqs, max_num_batched_tokens, enable_chunked_prefill)
