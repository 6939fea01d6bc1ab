"""The FP8 KV cache plugged into the reference engine: storage, bytes, and output close to bf16/fp32."""
from __future__ import annotations

import pytest
import torch

from reference_engine import EngineConfig, SamplingParams
from reference_engine.engine import LLMEngine
from reference_engine.quant.kv_engine import SCALE_BYTES, enable_fp8_kv_cache, pack_kv, unpack_kv
from triage.baseline.quality import compare_logits, engine_prefill_logits
from triage.errors import EngineError


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
    eng = _engine()
    before = eng.runner.kv_cache_bytes
    after = enable_fp8_kv_cache(eng)
    d = eng.model_config.head_dim
    assert after == before * (d + SCALE_BYTES) // (4 * d)   # fp32 cache -> 1 byte + 4-byte scale per head
    assert eng.stats().kv_cache_bytes == after
    got = engine_prefill_logits(eng, prompt)
    err = compare_logits([ref], [got])
    assert err.max_abs > 0                      # it really went through e4m3
    assert err.mean_abs < 0.05 * err.reference_logit_std
    assert err.top1_agreement_frac >= 0.9


def test_fp8_cache_decodes_and_shares_prefix_blocks():
    eng = _engine(enable_prefix_caching=True)
    enable_fp8_kv_cache(eng)
    prefix = list(range(1, 49))  # three full 16-token blocks
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    first = eng.generate([prefix + [100]], params)[0]
    second = eng.generate([prefix + [100]], params)[0]
    assert len(first.output_token_ids) == 6
    assert second.output_token_ids == first.output_token_ids   # cached fp8 blocks give the same tokens
    assert eng.stats().prefix_cache_hits_total >= 48


def test_enable_fp8_refuses_a_busy_or_converted_engine():
    eng = _engine()
    eng.add_request("a", [1, 2, 3], SamplingParams(max_tokens=2))
    with pytest.raises(EngineError, match="before adding requests"):
        enable_fp8_kv_cache(eng)
    eng2 = _engine()
    enable_fp8_kv_cache(eng2)
    with pytest.raises(EngineError, match="already"):
        enable_fp8_kv_cache(eng2)
