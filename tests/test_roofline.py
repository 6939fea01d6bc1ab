"""triage/core/roofline.py: the seeds' formulas, checked against hand-computed numbers."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.core import roofline

GIB = 2**30


def test_kv_per_user_llama70b_fp16_4k_is_1_25_gib():
    # Seed 004: 2 x L x H_kv x d x bytes x N, Llama 70B (L=80, H_kv=8, d=128), FP16, one user, 4K.
    per_token = roofline.kv_bytes_per_token(80, 8, 128, "fp16")
    assert per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    assert per_token * 4096 == 1.25 * GIB


def test_kv_at_batch_32_follows_the_formula_not_the_seeds_342_gb():
    # Seed 004 says "batch=32: 342 GB", but its own formula gives 32 x 1.25 GiB = 40 GiB at 4K;
    # 342 GB is what 32 users need at 32K context.
    per_token = roofline.kv_bytes_per_token(80, 8, 128, "fp16")
    assert roofline.kv_bytes_per_sequence(4096, per_token) * 32 == 40 * GIB
    assert roofline.kv_bytes_per_sequence(32768, per_token) * 32 / 1e9 == pytest.approx(343.6, abs=0.1)


def test_kv_dtype_halves_and_mha_vs_gqa_scales_with_kv_heads():
    gqa = roofline.kv_bytes_per_token(32, 8, 128, "bf16")
    mha = roofline.kv_bytes_per_token(32, 32, 128, "bf16")
    assert mha == 4 * gqa
    assert roofline.kv_bytes_per_token(32, 8, 128, "fp8") == gqa / 2


def test_mla_caches_one_latent_per_layer():
    # DeepSeek V3: 61 layers x (512 latent + 64 rope) x 2 bytes, no factor 2 for K and V.
    assert roofline.mla_kv_bytes_per_token(61, 512, 64, "bf16") == 61 * 576 * 2 == 70_272


def test_sliding_window_stops_growing_at_the_window():
    full, window = 1000.0, 3000.0
    assert roofline.kv_bytes_per_sequence(2048, full, window, 4096) == 2048 * (full + window)
    assert roofline.kv_bytes_per_sequence(10_000, full, window, 4096) == 10_000 * full + 4096 * window
    assert roofline.kv_tokens_held(10, None) == 10


@pytest.mark.parametrize(("params", "dtype", "expected_gb"), [
    (70_000_000_000, "fp16", 140.0),    # seed 000: 70B FP16 = 140 GB
    (70_000_000_000, "fp8", 70.0),
    (7_000_000_000, "fp16", 14.0),      # seed 001/004: 7B FP16 = 14 GB
    (7_000_000_000, "fp32", 28.0),
])
def test_weight_bytes_for_a_dtype(params, dtype, expected_gb):
    assert roofline.weight_bytes(params, dtype) / 1e9 == pytest.approx(expected_gb)


def test_quantized_weights_keep_embeddings_in_bf16_and_pay_for_int4_scales():
    n, emb = 8_000_000_000, 1_000_000_000
    fp8 = roofline.weight_bytes(n, "fp8", num_unquantized_params=emb)
    assert fp8 == 7e9 * 1 + 1e9 * 2
    int4 = roofline.weight_bytes(n, "int4", num_unquantized_params=emb)
    assert int4 == pytest.approx(7e9 * (0.5 + 4 / 128) + 2e9)
    # Unquantized dtypes ignore the split.
    assert roofline.weight_bytes(n, "bf16", num_unquantized_params=emb) == 16e9
    with pytest.raises(ValueError):
        roofline.weight_bytes(n, "fp8", num_unquantized_params=n + 1)


def test_unknown_dtype_names_the_choices():
    with pytest.raises(roofline.UnknownDtypeError, match="bf16"):
        roofline.dtype_bytes("fp6")


def test_decode_bound_formula_by_hand():
    # B x BW / (W + B x ctx x kv): 16 GB of weights on 3.35 TB/s, no context -> 209.4 tok/s.
    assert roofline.decode_tokens_per_s_bound(1, 3.35e12, 16e9, 0, 131072) == pytest.approx(209.375)
    # 8 sequences of 4096 tokens at 128 KiB/token add 8 x 0.5 GiB to every step.
    b8 = roofline.decode_tokens_per_s_bound(8, 3.35e12, 16e9, 4096, 131072)
    assert b8 == pytest.approx(8 * 3.35e12 / (16e9 + 8 * 4096 * 131072))
    assert 209.375 < b8 < 8 * 209.375
    with pytest.raises(ValueError):
        roofline.decode_tokens_per_s_bound(0, 3.35e12, 16e9, 0, 1)


def test_step_bound_picks_the_slower_side():
    # 16 GB at 3.35 TB/s = 4.78 ms; 1 TFLOP at 989 TFLOP/s = 1.01 ms: memory-bound.
    b = roofline.decode_step_bound(1, 16e9, 0.0, 1e12, 3.35e12, 989e12)
    assert b.limited_by == "memory"
    assert b.time_s == pytest.approx(16e9 / 3.35e12)
    # 512 sequences x 16 GFLOP each = 8.2 PFLOP: compute-bound.
    b = roofline.decode_step_bound(512, 16e9, 0.0, 16e9, 3.35e12, 989e12)
    assert b.limited_by == "compute"
    assert b.time_s == pytest.approx(512 * 16e9 / 989e12)
    with pytest.raises(ValueError):
        roofline.step_bound(1, 1, 0, 1)


def test_prefill_flops_is_2n_per_token_plus_causal_attention():
    n, params, L, H, d = 1000, 8e9, 32, 32, 128
    attn = 2 * H * (d + d) * L * (n * (n + 1) / 2)
    assert roofline.prefill_flops(int(params), n, L, H, d) == pytest.approx(2 * params * n + attn)
    # ~2 x L x H x d x n^2 for long prompts.
    assert attn == pytest.approx(2 * L * H * d * n * n, rel=2e-3)


def test_causal_keys_sum_with_a_window():
    assert roofline.causal_keys_sum(4) == 10
    assert roofline.causal_keys_sum(6, 3) == 6 + 3 * 3
    windowed = roofline.prefill_flops(1, 8192, 2, 8, 64, num_window_layers=1, sliding_window_tokens=1024)
    full = roofline.prefill_flops(1, 8192, 2, 8, 64)
    assert windowed < full


def test_attention_flops_per_decode_token():
    assert roofline.attention_flops_per_token(80, 64, 128, 128, 4096) == 2 * 80 * 64 * 256 * 4096


def test_moe_fraction_of_experts_a_batch_reads():
    assert roofline.moe_expert_fraction_touched(256, 8, 1) == pytest.approx(8 / 256)
    assert roofline.moe_expert_fraction_touched(256, 8, 0) == 0
    assert roofline.moe_expert_fraction_touched(8, 2, 64) == pytest.approx(1 - 0.75**64)
    assert math.isclose(roofline.moe_expert_fraction_touched(0, 0, 5), 1.0)


def test_ridge_point():
    assert roofline.ridge_point_flops_per_byte(989.4e12, 3.35e12) == pytest.approx(295.3, abs=0.1)


@settings(max_examples=200, deadline=None)
@given(batch=st.integers(1, 1024), weight_gb=st.floats(0.1, 1000), ctx=st.integers(0, 131072),
       kv_bytes=st.integers(1, 1_000_000), bw_tbs=st.floats(0.1, 10))
def test_decode_bound_grows_with_batch_but_each_sequence_slows(batch, weight_gb, ctx, kv_bytes, bw_tbs):
    bw, w = bw_tbs * 1e12, weight_gb * 1e9
    b1 = roofline.decode_tokens_per_s_bound(batch, bw, w, ctx, kv_bytes)
    b2 = roofline.decode_tokens_per_s_bound(batch + 1, bw, w, ctx, kv_bytes)
    assert b2 >= b1 * (1 - 1e-12)
    assert b2 / (batch + 1) <= b1 / batch * (1 + 1e-12)
    assert b1 / batch <= bw / w * (1 + 1e-12)          # never faster than reading the weights alone
