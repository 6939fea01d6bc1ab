"""The C++ decode-attention kernel (layers/kernels/decode_attention.cpp) against the naive backend, and where
the SDPA backend uses it."""
from __future__ import annotations

import random

import pytest
import torch

from triage.reference_engine.layers.attention.base import AttentionMetadata
from triage.reference_engine.layers.attention.naive import NaiveAttention
from triage.reference_engine.layers.attention.sdpa import SdpaAttention
from triage.reference_engine.layers.kernels import decode_attention as da

needs_kernel = pytest.mark.skipif(da.kernel()[0] is None, reason=f"decode-attention kernel unavailable: {da.kernel()[1]}")


def _batch(batch: int, hq: int, hkv: int, d: int, block: int, dtype: torch.dtype, max_len: int, seed: int,
           q_dtype: torch.dtype = torch.float32):
    rng = random.Random(seed)
    torch.manual_seed(seed)
    lens = [rng.randint(1, max_len) for _ in range(batch)]
    per_seq = [-(-n // block) for n in lens]
    ids = list(range(sum(per_seq) + 3))
    rng.shuffle(ids)                      # scattered blocks, as a pool hands them out after some churn
    tables, at = [], 0
    for k in per_seq:
        tables.append(ids[at:at + k])
        at += k
    k_cache = torch.randn(len(ids), block, hkv, d).to(dtype)
    v_cache = torch.randn(len(ids), block, hkv, d).to(dtype)
    q = torch.randn(batch, hq, d).to(q_dtype)
    meta = AttentionMetadata(q_starts=list(range(batch)), q_lens=[1] * batch, kv_lens=lens, block_tables=tables,
                             block_size=block)
    return q, k_cache, v_cache, meta


@needs_kernel
@pytest.mark.parametrize("batch,hq,hkv,d,block,dtype", [
    (1, 8, 2, 64, 16, torch.float32),       # GQA 4:1, bs=1
    (5, 12, 4, 64, 16, torch.float32),      # the small preset's heads, a batch
    (3, 8, 8, 32, 16, torch.bfloat16),      # MHA, a bf16 cache
    (4, 4, 1, 20, 1, torch.float32),        # one-slot blocks, a head_dim that is not a multiple of 8
    (2, 16, 4, 128, 32, torch.bfloat16),
    (2, 14, 2, 72, 16, torch.float32),      # 7 query heads a K/V head (tiles of 4 and 3), d = 64 + 8
])
def test_the_kernel_gives_what_the_naive_backend_gives(batch, hq, hkv, d, block, dtype):
    q, k_cache, v_cache, meta = _batch(batch, hq, hkv, d, block, dtype, max_len=150, seed=batch + d)
    got = da.decode_attention(q, k_cache, v_cache, meta, 0.125)
    want = NaiveAttention()(q, k_cache.float(), v_cache.float(), meta, 0.125)
    assert got is not None and got.shape == q.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6)


@needs_kernel
@pytest.mark.parametrize("batch", [1, 4])
def test_a_bf16_query_is_widened_and_its_output_narrowed(batch):
    """A bf16 engine's decode: the kernel's fp32 arithmetic on the bf16 query's values, returned in bf16."""
    q, k_cache, v_cache, meta = _batch(batch, 12, 4, 64, 16, torch.bfloat16, max_len=150, seed=7,
                                       q_dtype=torch.bfloat16)
    got = da.decode_attention(q, k_cache, v_cache, meta, 0.125)
    assert got is not None and got.dtype == torch.bfloat16 and got.shape == q.shape
    fp32 = da.decode_attention(q.float(), k_cache, v_cache, meta, 0.125)
    assert torch.equal(got, fp32.bfloat16())                            # one rounding, of the fp32 result
    want = NaiveAttention()(q.float(), k_cache.float(), v_cache.float(), meta, 0.125)
    torch.testing.assert_close(fp32, want, rtol=1e-5, atol=2e-6)


@needs_kernel
def test_a_context_of_one_token_returns_its_value_row():
    q, k_cache, v_cache, meta = _batch(3, 4, 2, 16, 16, torch.float32, max_len=1, seed=1)
    got = da.decode_attention(q, k_cache, v_cache, meta, 0.125)
    for b, table in enumerate(meta.block_tables):
        torch.testing.assert_close(got[b], v_cache[table[0], 0].repeat_interleave(2, dim=0))


@needs_kernel
def test_the_sdpa_backend_uses_the_kernel_for_decode_batches_and_torch_where_it_does_not_apply(monkeypatch):
    calls = []
    real = da.kernel()[0]

    class Counting:
        def decode_attention(self, *args):
            calls.append(args[4])
            return real.decode_attention(*args)

    monkeypatch.setattr(da, "kernel", lambda: (Counting(), None))
    backend = SdpaAttention()
    q, k_cache, v_cache, meta = _batch(4, 8, 2, 32, 16, torch.float32, max_len=100, seed=3)
    backend(q, k_cache, v_cache, meta, 0.125)
    assert calls == [meta.kv_lens]
    backend(q.half(), k_cache, v_cache, meta, 0.125)                           # an fp16 query: torch's path
    backend(q, k_cache.half(), v_cache.half(), meta, 0.125)                    # an fp16 cache: torch's path
    long_len = da.ONE_SEQUENCE_MAX_CONTEXT + 1
    long_blocks = -(-long_len // 16)
    long_meta = AttentionMetadata(q_starts=[0], q_lens=[1], kv_lens=[long_len],
                                  block_tables=[list(range(long_blocks))], block_size=16)
    long_cache = torch.randn(long_blocks, 16, 2, 32)
    backend(torch.randn(1, 8, 32), long_cache, long_cache, long_meta, 0.125)  # one long sequence: torch's path
    assert len(calls) == 1
    backend(torch.randn(1, 8, 32).bfloat16(), long_cache.bfloat16(), long_cache.bfloat16(), long_meta, 0.125)
    assert calls[1:] == [[long_len]]                                            # bf16: the kernel, however long


def test_without_the_kernel_decode_keeps_the_torch_path(monkeypatch):
    monkeypatch.setattr(da, "kernel", lambda: (None, "no compiler here"))
    q, k_cache, v_cache, meta = _batch(2, 4, 2, 16, 16, torch.float32, max_len=40, seed=5)
    assert da.decode_attention(q, k_cache, v_cache, meta, 0.125) is None
    want = NaiveAttention()(q, k_cache, v_cache, meta, 0.125)
    torch.testing.assert_close(SdpaAttention()(q, k_cache, v_cache, meta, 0.125), want, rtol=1e-5, atol=2e-6)


def _new_rows(meta: AttentionMetadata, hkv: int, d: int, dtype: torch.dtype, seed: int):
    """Each sequence's last position as its new token: (k, v, slots), as a decode step hands them over."""
    torch.manual_seed(seed)
    slots = torch.tensor([table[(n - 1) // meta.block_size] * meta.block_size + (n - 1) % meta.block_size
                          for table, n in zip(meta.block_tables, meta.kv_lens, strict=True)])
    wide = torch.randn(meta.num_seqs, 2 * hkv, d).to(dtype)
    return wide[:, ::2], wide[:, 1::2], slots        # strided views, as a fused QKV projection's split gives


@needs_kernel
@pytest.mark.parametrize("cache_dtype,row_dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                                                   (torch.bfloat16, torch.bfloat16), (torch.float32, torch.bfloat16)])
def test_the_new_rows_are_written_as_index_copy_writes_them_then_attended(cache_dtype, row_dtype):
    q, k_cache, v_cache, meta = _batch(4, 12, 4, 64, 16, cache_dtype, max_len=150, seed=11)
    k_new, v_new, slots = _new_rows(meta, 4, 64, row_dtype, seed=12)
    want_k, want_v = k_cache.clone(), v_cache.clone()
    for cache, new in ((want_k, k_new), (want_v, v_new)):
        cache.view(-1, 4, 64).index_copy_(0, slots, new.to(cache_dtype))
    want = da.decode_attention(q, want_k, want_v, meta, 0.125)
    got = da.decode_attention(q, k_cache, v_cache, meta, 0.125, (k_new, v_new, slots))
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)      # torch's own rounding to bf16
    assert torch.equal(got, want)


@needs_kernel
def test_a_slot_outside_the_cache_is_refused_and_nothing_is_written():
    q, k_cache, v_cache, meta = _batch(3, 8, 2, 32, 16, torch.float32, max_len=60, seed=13)
    k_new, v_new, slots = _new_rows(meta, 2, 32, torch.float32, seed=14)
    slots[-1] = k_cache.shape[0] * k_cache.shape[1]
    before = k_cache.clone(), v_cache.clone()
    with pytest.raises(RuntimeError, match="outside the cache"):
        da.decode_attention(q, k_cache, v_cache, meta, 0.125, (k_new, v_new, slots))
    assert torch.equal(k_cache, before[0]) and torch.equal(v_cache, before[1])


@needs_kernel
def test_a_plain_cache_writes_and_attends_in_one_kernel_call_where_it_applies(monkeypatch):
    """The KV format hands a decode batch's write to the SDPA backend's kernel call; where the kernel does not
    apply (an fp16 query here), it writes the rows itself and the backend attends by torch's path."""
    from triage.reference_engine.layers.kv_cache import PlainKvFormat

    calls = []
    real = da.kernel()[0]

    class Counting:
        def decode_attention(self, *args):
            calls.append(len(args))
            return real.decode_attention(*args)

    monkeypatch.setattr(da, "kernel", lambda: (Counting(), None))
    for q_dtype, kernel_args in ((torch.float32, [9]), (torch.float16, [])):
        calls.clear()
        q, k_cache, v_cache, meta = _batch(3, 8, 2, 32, 16, torch.float32, max_len=80, seed=15, q_dtype=q_dtype)
        k_new, v_new, slots = _new_rows(meta, 2, 32, q_dtype, seed=16)
        out = PlainKvFormat(torch.float32).write_and_attend(SdpaAttention(), q, k_new, v_new, k_cache, v_cache, slots,
                                                            meta, 0.125)
        assert calls == kernel_args
        flat_k, flat_v = k_cache.view(-1, 2, 32), v_cache.view(-1, 2, 32)
        assert torch.equal(flat_k[slots], k_new.float()) and torch.equal(flat_v[slots], v_new.float())
        want = NaiveAttention()(q.float(), k_cache, v_cache, meta, 0.125)
        torch.testing.assert_close(out.float(), want, rtol=2e-3, atol=2e-3)
