"""bf16-stored weights with fp32 arithmetic (reference_engine/layers/kernels/bf16_weights.py): each branch of the
choice forced, the kernel's numbers against torch's fp32 matmul, and greedy tokens unchanged."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from triage.core.errors import EngineError
from triage.reference_engine.layers.kernels import bf16_weights as bw

needs_kernel = pytest.mark.skipif(bw.kernel()[0] is None, reason=f"bf16 kernel unavailable: {bw.kernel()[1]}")


def _bf16_valued(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16).float()


@needs_kernel
@pytest.mark.parametrize("rows", [1, 3, 32, 64])
def test_the_layer_matches_fp32_on_bf16_values(rows):
    linear = nn.Linear(200, 96, bias=True)
    with torch.no_grad():
        linear.weight.copy_(_bf16_valued(96, 200))
    stored = bw.Bf16StoredLinear(linear)
    assert stored.weight.dtype == torch.bfloat16 and torch.equal(stored.weight.float(), linear.weight)
    x = torch.randn(rows, 200)
    # fp32 sums of 200 products in another order: a few ulps of the ~10-sized outputs apart.
    torch.testing.assert_close(stored(x), F.linear(x, linear.weight, linear.bias), rtol=1e-5, atol=1e-4)
    assert torch.equal(stored.to_linear().weight, linear.weight)       # back to fp32, exactly
    import copy

    torch.testing.assert_close(copy.deepcopy(stored)(x), stored(x), rtol=0, atol=0)   # baseline copies models


def test_weights_that_are_not_bf16_values_stay_fp32():
    model = nn.Sequential(nn.Linear(16, 16))
    use, why = bw.choose_storage(model, 16, 16, "cpu")
    assert not use and "not bf16 values" in why


def test_no_kernel_means_fp32_and_says_why(monkeypatch):
    model = nn.Sequential(nn.Linear(16, 16))
    with torch.no_grad():
        model[0].weight.copy_(_bf16_valued(16, 16))
    monkeypatch.setattr(bw, "kernel", lambda: (None, "the CPU lacks AVX2/FMA"))
    use, why = bw.choose_storage(model, 16, 16, "cpu")
    assert not use and "lacks AVX2/FMA" in why
    assert bw.choose_storage(model, 16, 16, "cuda")[0] is False


@needs_kernel
def test_the_measurement_decides(monkeypatch):
    model = nn.Sequential(nn.Linear(256, 256))
    with torch.no_grad():
        model[0].weight.copy_(_bf16_valued(256, 256))
    monkeypatch.setattr(bw, "MIN_GAIN_X", 1e9)          # no kernel is a billion times faster
    use, why = bw.choose_storage(model, 256, 1024, "cpu")
    assert not use and "ms with bf16 weights" in why and "only" in why
    monkeypatch.setattr(bw, "MIN_GAIN_X", 0.0)
    use, why = bw.choose_storage(model, 256, 1024, "cpu")
    assert use and why.startswith("bf16-stored weights")


@needs_kernel
def test_the_engine_keeps_greedy_tokens_and_quantizes_from_exact_values():
    from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams
    from triage.reference_engine.layers.quant import quantize_model

    prompts = [[5, 17, 99, 3, 250, 8], [1, 2, 3]]
    params = [SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)] * 2
    plain = LLMEngine(EngineConfig(model="small", dtype="float32", weight_storage="fp32", max_model_len=256, num_kv_blocks=64))
    stored = LLMEngine(EngineConfig(model="small", dtype="float32", weight_storage="bf16", max_model_len=256, num_kv_blocks=64))
    assert plain.weight_storage == "float32" and stored.weight_storage == "bfloat16"
    assert "forced" in stored.dtype_note
    a = [o.output_token_ids for o in plain.generate(prompts, params)]
    b = [o.output_token_ids for o in stored.generate(prompts, params)]
    assert a == b
    summary = quantize_model(stored.runner.model, "int4")
    assert summary.num_layers_converted > 0


def test_forcing_bf16_storage_on_fp32_valued_weights_is_an_error():
    from triage.reference_engine import EngineConfig, LLMEngine

    with pytest.raises(EngineError, match="not bf16 values"):
        LLMEngine(EngineConfig(model="tiny", weight_storage="bf16"))


def test_a_build_lock_left_by_a_killed_build_is_removed_and_a_fresh_one_is_kept(tmp_path, monkeypatch, caplog):
    import os
    import time

    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "_get_build_directory", lambda name, verbose: str(tmp_path / name))
    (tmp_path / "fresh").mkdir()
    (tmp_path / "stale").mkdir()
    fresh, stale = tmp_path / "fresh" / "lock", tmp_path / "stale" / "lock"
    fresh.touch()
    stale.touch()
    old = time.time() - bw.STALE_BUILD_LOCK_S - 60
    os.utime(stale, (old, old))
    bw._drop_stale_build_lock("fresh")
    bw._drop_stale_build_lock("stale")
    bw._drop_stale_build_lock("absent")
    assert fresh.exists() and not stale.exists()
    assert "left by a build killed" in caplog.text
