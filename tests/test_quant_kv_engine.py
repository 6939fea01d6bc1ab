"""The FP8 KV cache plugged into the reference engine: storage, bytes, and output close to bf16/fp32."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from triage.baseline.quality import compare_logits, engine_prefill_logits
from triage.reference_engine import EngineConfig, SamplingParams
from triage.reference_engine.engine.llm_engine import LLMEngine
from triage.reference_engine.layers.quant.kv_fp8 import SCALE_BYTES, pack_kv, unpack_kv


def _engine(**kw) -> LLMEngine:
    cfg = dict(model="tiny", dtype="float32", max_num_seqs=4, max_model_len=128, num_kv_blocks=64,
               enable_prefix_caching=False, max_num_batched_tokens=256)
    cfg.update(kw)
    return LLMEngine(EngineConfig(**cfg))


def test_pack_unpack_roundtrip_keeps_scale_bytes_with_values():
    x = torch.randn(5, 2, 16) * torch.tensor([0.01, 50.0])[None, :, None]
    packed = pack_kv(x)
    assert packed.dtype == torch.uint8 and packed.shape == (5, 2, 16 + SCALE_BYTES)
    back = unpack_kv(packed, torch.float32)
    rel = (back - x).abs().amax(-1) / x.abs().amax(-1)
    assert bool((rel <= 2 ** -4 + 1e-6).all())


@pytest.mark.slow
def test_fp8_cache_bytes_and_logits_close_to_full_precision():
    prompt = list(range(10, 60))
    base = _engine()
    ref = engine_prefill_logits(base, prompt)
    before = base.runner.kv_cache_bytes
    eng = _engine(kv_cache_dtype="fp8")                 # the same number of blocks, stored as e4m3
    after = eng.runner.kv_cache_bytes
    assert eng.runner.num_blocks == base.runner.num_blocks
    d = eng.model_config.head_dim
    assert after == before * (d + SCALE_BYTES) // (4 * d)   # fp32 cache -> 1 byte + 4-byte scale per head
    assert eng.stats().kv_cache_bytes == after
    got = engine_prefill_logits(eng, prompt)
    err = compare_logits([ref], [got])
    assert err.max_abs > 0                      # it really went through e4m3
    assert err.mean_abs < 0.05 * err.reference_logit_std
    assert err.top1_agreement_frac >= 0.9


def test_fp8_cache_decodes_and_shares_prefix_blocks():
    eng = _engine(enable_prefix_caching=True, kv_cache_dtype="fp8")
    prefix = list(range(1, 49))  # three full 16-token blocks
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    first = eng.generate([prefix + [100]], params)[0]
    second = eng.generate([prefix + [100]], params)[0]
    assert len(first.output_token_ids) == 6
    assert second.output_token_ids == first.output_token_ids   # cached fp8 blocks give the same tokens
    assert eng.stats().prefix_cache_hits_total >= 48


@pytest.mark.parametrize("spelling", ["fp8", "fp8_e4m3"])
def test_engine_config_fp8_kv_cache_sizes_blocks_by_fp8_bytes_and_keeps_greedy_tokens(spelling):
    budget = 256 * 1024
    ref = _engine(num_kv_blocks=None, kv_cache_bytes=budget)
    eng = _engine(num_kv_blocks=None, kv_cache_bytes=budget, kv_cache_dtype=spelling)
    mc = eng.model_config
    fp8_per_token = 2 * mc.num_hidden_layers * mc.num_key_value_heads * (mc.head_dim + SCALE_BYTES)
    assert eng.runner.kv_cache.dtype == torch.uint8
    assert eng.stats().kv_cache_dtype == "fp8_e4m3"
    assert eng.kv_cache_tokens_capacity == (budget // fp8_per_token) // 16 * 16
    assert eng.kv_cache_tokens_capacity > 3 * ref.kv_cache_tokens_capacity   # fp32 = 4 B/value, fp8 = 1 + 4/16
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    prompts = [list(range(5, 40)), list(range(100, 107)), [3] * 20]
    want = [c.output_token_ids for c in ref.generate(prompts, params)]
    got = [c.output_token_ids for c in eng.generate(prompts, params)]
    # A random tiny model's logits are nearly flat, so one flipped argmax changes the rest of a greedy
    # run: compare the first token, then teacher-force the reference continuation through both caches.
    assert [g[0] for g in got] == [w[0] for w in want]
    agree, total = 0, 0
    for prompt, w, g in zip(prompts, want, got, strict=True):
        ref_top1 = engine_prefill_logits(ref, prompt + w)[len(prompt) - 1:-1].argmax(-1)
        fp8_top1 = engine_prefill_logits(eng, prompt + w)[len(prompt) - 1:-1].argmax(-1)
        agree, total = agree + int((ref_top1 == fp8_top1).sum()), total + len(w)
        # decoding through the e4m3 cache == prefilling the same tokens through it
        own = engine_prefill_logits(eng, prompt + g)[len(prompt) - 1:-1].argmax(-1)
        assert own.tolist() == g
    assert agree / total >= 0.9
    assert eng.stats().num_kv_blocks_free == eng.stats().num_kv_blocks_total    # nothing leaked


def test_the_engine_imports_no_quantization_code_unless_an_fp8_cache_is_asked_for():
    import subprocess
    import sys

    code = ("import sys, triage.reference_engine.engine.llm_engine; "
            "print(any(m.startswith('triage.reference_engine.layers.quant') for m in sys.modules))")
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         cwd=repo)
    assert out.stdout.strip() == "False"
