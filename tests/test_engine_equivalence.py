"""Greedy tokens must not depend on how the engine batches, pages, chunks, preempts or shares KV."""
from __future__ import annotations

import random

import pytest
import torch

from tests.engine_helpers import fork_request, one_torch_thread  # noqa: F401  (autouse fixture)
from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams

MAX_TOKENS = 12


def _prompts(seed: int = 0, n: int = 5) -> list[list[int]]:
    rng = random.Random(seed)
    return [[256] + [rng.randrange(256) for _ in range(rng.randrange(3, 40))] for _ in range(n)]


def _reference(prompts: list[list[int]]) -> list[list[int]]:
    """Greedy decoding by full causal forwards with no KV cache at all."""
    engine = LLMEngine(EngineConfig(model="tiny"))
    model = engine.runner.model
    outs = []
    for prompt in prompts:
        ids = list(prompt)
        for _ in range(MAX_TOKENS):
            ids.append(int(model.forward_full(ids)[-1].argmax()))
        outs.append(ids[len(prompt):])
    return outs


@pytest.fixture(scope="module")
def prompts():
    return _prompts()


@pytest.fixture(scope="module")
def reference(prompts):
    return _reference(prompts)


GREEDY = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)


def _run(config: EngineConfig, prompts) -> tuple[list[list[int]], LLMEngine]:
    engine = LLMEngine(config)
    return [c.output_token_ids for c in engine.generate(prompts, GREEDY)], engine


def test_reference_is_not_degenerate(reference):
    # A model that repeats one token would make every equivalence below vacuous.
    assert all(len(set(out)) > 2 for out in reference)
    assert len({tuple(out) for out in reference}) == len(reference)


def test_contiguous_static_matches_reference(prompts, reference):
    outs, engine = _run(EngineConfig(kv_layout="contiguous", scheduler="static", max_model_len=128,
                                     max_num_seqs=2), prompts)
    assert outs == reference
    assert engine.stats().block_size == 128


@pytest.mark.parametrize("chunk", [1, 3, 16])
def test_paged_continuous_chunked_matches_reference(prompts, reference, chunk):
    outs, engine = _run(EngineConfig(max_num_batched_tokens=chunk, block_size=4), prompts)
    assert outs == reference
    assert engine.stats().num_kv_blocks_free == engine.stats().num_kv_blocks_total


@pytest.mark.parametrize("attention", ["naive", "tiled", "sdpa"])
def test_every_backend_matches_reference(prompts, reference, attention):
    outs, engine = _run(EngineConfig(attention=attention, block_size=8, max_num_batched_tokens=24), prompts)
    assert outs == reference
    assert engine.stats().attention_backend == attention


def test_forced_preemption_matches_reference(prompts, reference):
    # 14 blocks of 4 tokens cannot hold five ~35-token sequences at once: the scheduler must preempt.
    outs, engine = _run(EngineConfig(num_kv_blocks=14, block_size=4, max_num_batched_tokens=64,
                                     enable_prefix_caching=False), prompts)
    assert outs == reference
    stats = engine.stats()
    assert stats.num_preemptions_total > 0
    assert stats.num_kv_blocks_free == 14


def test_shared_prefix_reuses_blocks_and_keeps_outputs(reference):
    prefix = _prompts(seed=7, n=1)[0][:1] + list(range(40, 72))      # 33 tokens: 8 full blocks of 4
    prompts = [prefix + tail for tail in ([1, 2, 3], [9, 8], [5, 5, 5, 5])]
    expected = _reference(prompts)
    engine = LLMEngine(EngineConfig(block_size=4, max_num_batched_tokens=256))
    first = engine.generate(prompts[:1], GREEDY)[0]
    assert first.output_token_ids == expected[0]
    # Hold the others mid-flight to inspect sharing.
    for i, prompt in enumerate(prompts[1:], start=1):
        engine.add_request(f"r{i}", prompt, GREEDY)
    outs: dict[str, list[int]] = {}
    for out in engine.step():
        outs.setdefault(out.request_id, []).extend(out.new_token_ids)
    seqs = [engine._seqs["r1"], engine._seqs["r2"]]
    shared = seqs[0].block_table[:8]
    assert shared == seqs[1].block_table[:8]
    bm = engine.allocator
    assert all(bm.blocks[b].ref_count == 2 for b in shared)
    assert all(s.num_cached_tokens == 32 for s in seqs)
    bm.check_invariants()
    while engine.has_unfinished():
        for out in engine.step():
            outs.setdefault(out.request_id, []).extend(out.new_token_ids)
    assert [outs["r1"], outs["r2"]] == expected[1:]
    assert all(b.ref_count == 0 for b in bm.blocks)
    stats = engine.stats()
    assert stats.prefix_cache_hits_total == 64
    assert stats.num_kv_blocks_free == stats.num_kv_blocks_total


def test_prefix_cache_survives_preemption_and_is_verified(prompts, reference):
    outs, engine = _run(EngineConfig(num_kv_blocks=14, block_size=4, max_num_batched_tokens=64,
                                     enable_prefix_caching=True), prompts)
    assert outs == reference
    engine.allocator.check_invariants()


def test_bfloat16_compute_stays_close():
    engine = LLMEngine(EngineConfig(dtype="bfloat16"))
    assert engine.stats().dtype == "bfloat16"
    ids = _prompts(seed=3, n=1)[0]
    fp32 = LLMEngine(EngineConfig()).runner.model.forward_full(ids)
    bf16 = engine.runner.model.forward_full(ids)
    assert torch.allclose(fp32, bf16, atol=0.5, rtol=0.1)


@pytest.mark.parametrize("layout", ["paged", "contiguous"])
def test_fork_copies_on_write_and_both_branches_continue_correctly(layout):
    prompt = _prompts(seed=9, n=1)[0][:10] + [1, 2, 3]          # 13 tokens: the last block is partly full
    expected = _reference([prompt])[0]
    engine = LLMEngine(EngineConfig(block_size=4, kv_layout=layout, max_model_len=64, max_num_seqs=4))
    engine.add_request("p", prompt, GREEDY)
    got: dict[str, list[int]] = {"p": []}
    while len(got["p"]) < 3:
        for out in engine.step():
            got[out.request_id].extend(out.new_token_ids)
    fork_request(engine, "p", "c")                   # 16 tokens, 15 with KV: block 3 is shared and 3/4 full
    parent, child = engine._seqs["p"], engine._seqs["c"]
    got["c"] = list(got["p"])
    if layout == "paged":
        assert child.block_table == parent.block_table
        assert all(engine.allocator.blocks[b].ref_count == 2 for b in parent.block_table)
    else:
        assert child.block_table != parent.block_table   # a whole slot is copied up front
    for out in engine.step():
        got[out.request_id].extend(out.new_token_ids)
    if layout == "paged":
        assert child.block_table[:3] == parent.block_table[:3]
        assert child.block_table[3] != parent.block_table[3]     # copied on the first write
    while engine.has_unfinished():
        for out in engine.step():
            got[out.request_id].extend(out.new_token_ids)
    assert got["p"] == expected and got["c"] == expected
    assert engine.stats().num_kv_blocks_free == engine.stats().num_kv_blocks_total
    engine.allocator.check_invariants()


def test_forked_branches_sample_independently():
    engine = LLMEngine(EngineConfig(block_size=4))
    base = SamplingParams(max_tokens=16, temperature=1.0, seed=5, ignore_eos=True)
    engine.add_request("p", [256, 10, 20, 30, 40, 50], base)
    engine.step()
    fork_request(engine, "p", "c", SamplingParams(max_tokens=16, temperature=1.0, seed=6, ignore_eos=True))
    texts: dict[str, list[int]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            texts.setdefault(out.request_id, []).extend(out.new_token_ids)
    assert len(texts["p"]) == 15 and len(texts["c"]) == 15
    assert texts["p"] != texts["c"]
    with pytest.raises(Exception, match="no such"):
        fork_request(engine, "p", "again")
