"""All attention backends agree (fp32, atol 1e-5) with a dense reference on ragged paged batches."""
from __future__ import annotations

import random

import pytest
import torch

from triage.core.errors import EngineError
from triage.reference_engine.layers.attention import available_backends, get_backend
from triage.reference_engine.layers.attention.base import AttentionMetadata, lower_right_causal_mask
from triage.reference_engine.layers.attention.tiled import TiledAttention

BACKENDS = ["naive", "tiled", "sdpa"]


def _dense_reference(q, k, v, scale):
    """One sequence: q [n, Hq, d], k/v [kv, Hkv, d]; query row r is context position kv-n+r."""
    n, hq, _ = q.shape
    kv_len, hkv, _ = k.shape
    g = hq // hkv
    k = k.repeat_interleave(g, dim=1).double()
    v = v.repeat_interleave(g, dim=1).double()
    scores = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
    allowed = torch.arange(kv_len)[None, :] <= torch.arange(kv_len - n, kv_len)[:, None]
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).float()


def _random_case(rng: random.Random, hq: int, hkv: int, d: int, block_size: int, num_blocks: int,
                 shapes: list[tuple[int, int]]):
    """``shapes``: (q_len, kv_len) per sequence. Blocks are scattered randomly through the cache."""
    gen = torch.Generator().manual_seed(rng.randrange(1 << 30))
    k_cache = torch.randn(num_blocks, block_size, hkv, d, generator=gen)
    v_cache = torch.randn(num_blocks, block_size, hkv, d, generator=gen)
    free = list(range(num_blocks))
    rng.shuffle(free)
    tables, q_starts, q_lens, kv_lens = [], [], [], []
    total = 0
    for q_len, kv_len in shapes:
        nb = -(-kv_len // block_size)
        tables.append([free.pop() for _ in range(nb)])
        q_starts.append(total)
        q_lens.append(q_len)
        kv_lens.append(kv_len)
        total += q_len
    q = torch.randn(total, hq, d, generator=gen)
    meta = AttentionMetadata(q_starts=q_starts, q_lens=q_lens, kv_lens=kv_lens, block_tables=tables,
                             block_size=block_size)
    return q, k_cache, v_cache, meta


def _expected(q, k_cache, v_cache, meta, scale):
    out = torch.empty_like(q)
    bs = meta.block_size
    for i in range(meta.num_seqs):
        s, n, kv_len = meta.q_starts[i], meta.q_lens[i], meta.kv_lens[i]
        k = k_cache[meta.block_tables[i]].reshape(-1, *k_cache.shape[2:])[:kv_len]
        v = v_cache[meta.block_tables[i]].reshape(-1, *v_cache.shape[2:])[:kv_len]
        assert k.shape[0] == kv_len and bs > 0
        out[s:s + n] = _dense_reference(q[s:s + n], k, v, scale)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_match_reference_on_random_ragged_batches(backend, seed):
    rng = random.Random(seed)
    hkv = rng.choice([1, 2, 4])
    hq = hkv * rng.choice([1, 2, 4])                    # MHA, and GQA groups of 2 and 4
    block_size = rng.choice([1, 4, 16])
    shapes = []
    for _ in range(rng.randrange(1, 6)):
        kind = rng.choice(["prefill", "chunk", "decode"])
        kv_len = rng.randrange(1, 90)
        q_len = {"prefill": kv_len, "chunk": rng.randrange(1, kv_len + 1), "decode": 1}[kind]
        shapes.append((q_len, kv_len))
    q, kc, vc, meta = _random_case(rng, hq, hkv, 16, block_size, 400, shapes)
    scale = 16 ** -0.5
    out = get_backend(backend)(q, kc, vc, meta, scale)
    torch.testing.assert_close(out, _expected(q, kc, vc, meta, scale), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_chunked_prefill_uses_lower_right_alignment(backend):
    # q_len < kv_len: an upper-left causal mask (SDPA is_causal) would hide most of the context.
    rng = random.Random(11)
    q, kc, vc, meta = _random_case(rng, 4, 2, 8, 4, 64, [(5, 23), (1, 9), (7, 7)])
    out = get_backend(backend)(q, kc, vc, meta, 0.3)
    torch.testing.assert_close(out, _expected(q, kc, vc, meta, 0.3), atol=1e-5, rtol=1e-5)
    upper_left = torch.nn.functional.scaled_dot_product_attention(
        q[:5].transpose(0, 1), kc[meta.block_tables[0]].reshape(-1, 2, 8)[:23].repeat_interleave(2, 1).transpose(0, 1),
        vc[meta.block_tables[0]].reshape(-1, 2, 8)[:23].repeat_interleave(2, 1).transpose(0, 1),
        is_causal=True, scale=0.3).transpose(0, 1)
    assert not torch.allclose(upper_left, out[:5], atol=1e-3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_decode_batch(backend):
    rng = random.Random(5)
    q, kc, vc, meta = _random_case(rng, 8, 2, 16, 16, 200, [(1, n) for n in (1, 17, 64, 33, 2)])
    out = get_backend(backend)(q, kc, vc, meta, 0.25)
    torch.testing.assert_close(out, _expected(q, kc, vc, meta, 0.25), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kv_len", [1, 16, 17, 95])
@pytest.mark.parametrize("hq,hkv", [(8, 2), (4, 4), (6, 1)])
def test_single_sequence_decode(backend, kv_len, hq, hkv):
    # bs=1 decode: SDPA's one-query path (two matmuls over the KV heads); blocks scattered through the cache
    rng = random.Random(kv_len * 31 + hq)
    q, kc, vc, meta = _random_case(rng, hq, hkv, 16, 16, 40, [(1, kv_len)])
    out = get_backend(backend)(q, kc, vc, meta, 0.25)
    assert out.shape == q.shape
    torch.testing.assert_close(out, _expected(q, kc, vc, meta, 0.25), atol=1e-5, rtol=1e-5)


def test_tiled_streams_small_tiles_across_many_blocks():
    rng = random.Random(2)
    q, kc, vc, meta = _random_case(rng, 4, 2, 16, 4, 300, [(200, 260), (64, 64)])
    out = TiledAttention(q_tile_tokens=32, kv_tile_tokens=24)(q, kc, vc, meta, 0.25)
    torch.testing.assert_close(out, _expected(q, kc, vc, meta, 0.25), atol=1e-5, rtol=1e-5)


def test_contiguous_layout_single_block_per_sequence():
    # The "before" cache is the same interface with block_size = max_model_len, one block per sequence.
    rng = random.Random(3)
    q, kc, vc, meta = _random_case(rng, 4, 4, 8, 128, 6, [(30, 30), (1, 100), (4, 77)])
    for name in BACKENDS:
        out = get_backend(name)(q, kc, vc, meta, 0.35)
        torch.testing.assert_close(out, _expected(q, kc, vc, meta, 0.35), atol=1e-5, rtol=1e-5)


def test_lower_right_mask_shape_and_alignment():
    mask = lower_right_causal_mask(2, 5, torch.device("cpu"), q_offset=3)
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_registry_auto_and_unknown():
    assert set(BACKENDS) <= set(available_backends())
    assert get_backend("auto").name == "sdpa"
    with pytest.raises(EngineError, match="not available"):
        get_backend("flash9")


def test_auto_on_cuda_picks_triton_when_it_can_run_and_cpu_never_does(monkeypatch):
    import triage.reference_engine.layers.attention as attention
    import triage.reference_engine.layers.attention.triton_backend as triton_backend

    monkeypatch.setattr(attention, "_FACTORIES", dict(attention._FACTORIES))
    monkeypatch.setattr(attention, "_AUTO_ORDER", {k: list(v) for k, v in attention._AUTO_ORDER.items()})
    attention._FACTORIES.pop("triton", None)
    for order in attention._AUTO_ORDER.values():
        if "triton" in order:
            order.remove("triton")
    monkeypatch.setattr(triton_backend, "triton_unavailable_reason", lambda device: "no GPU here")
    assert attention.get_backend("auto", "cuda").name == "sdpa"       # Triton cannot run: SDPA, no error
    assert attention.get_backend("auto", "cpu").name == "sdpa"
    monkeypatch.setattr(triton_backend, "triton_unavailable_reason", lambda device: None)
    assert attention.get_backend("auto", "cpu").name == "sdpa"        # CPU never picks the GPU kernel
    assert attention.get_backend("auto", "cuda:0").name == "triton"
