"""The compute dtype is chosen by measurement: each branch forced with injected matmul timings."""
from __future__ import annotations

import pytest
import torch

from triage.reference_engine import EngineConfig, LLMEngine
from triage.reference_engine.host.dtype_choice import (
    allowed_dtypes,
    choose_dtype,
    time_matmul_s,
)
from triage.reference_engine.models.model_config import PRESETS


def timings(**seconds):
    calls = []

    def measure(dtype: str, device: str):
        calls.append(dtype)
        return seconds.get(dtype)
    measure.calls = calls
    return measure


def test_avx2_like_timings_pick_float32_for_a_bf16_checkpoint():
    m = timings(float32=0.0005, bfloat16=0.02)              # emulated bf16: 40x slower
    choice = choose_dtype("auto", "bfloat16", "cpu", measure=m, flags={"avx2", "fma"})
    assert choice.dtype is torch.float32 and not choice.forced
    assert sorted(m.calls) == ["bfloat16", "float32"]         # fp16 is not allowed for a bf16 checkpoint
    assert choice.note.startswith("float32: fastest measured") and "upcast exactly" in choice.note
    assert "no avx512_bf16" in choice.note and choice.timings_s == {"bfloat16": 0.02, "float32": 0.0005}


def test_bf16_capable_timings_keep_bfloat16():
    choice = choose_dtype("auto", "bfloat16", "cpu", measure=timings(float32=0.002, bfloat16=0.0007),
                          flags={"amx_bf16", "avx512_bf16"})
    assert choice.dtype is torch.bfloat16 and "fastest measured" in choice.note
    assert "amx_bf16" in choice.note


def test_a_near_tie_goes_to_the_narrower_dtype():
    choice = choose_dtype("auto", "bfloat16", "cpu", measure=timings(float32=0.00100, bfloat16=0.00105), flags=set())
    assert choice.dtype is torch.bfloat16 and "within 10%" in choice.note


def test_fp16_checkpoint_measures_fp16_against_fp32():
    m = timings(float32=0.004, float16=0.001)
    choice = choose_dtype("auto", "float16", "cpu", measure=m, flags={"avx512_fp16"})
    assert choice.dtype is torch.float16 and sorted(m.calls) == ["float16", "float32"]
    assert "avx512_fp16" in choice.note


@pytest.mark.parametrize("declared", ["float32", None])
def test_float32_or_undeclared_weights_are_never_narrowed_and_not_measured(declared):
    m = timings(float32=1.0, bfloat16=0.0001)
    choice = choose_dtype("auto", declared, "cpu", measure=m)
    assert choice.dtype is torch.float32 and m.calls == [] and "would change their values" in choice.note


def test_an_unusable_candidate_is_skipped_and_named():
    choice = choose_dtype("auto", "float16", "cpu", measure=timings(float32=0.001), flags=set())
    assert choice.dtype is torch.float32 and "unusable here: float16" in choice.note
    fallback = choose_dtype("auto", "float16", "cpu", measure=timings(), flags=set())
    assert fallback.dtype is torch.float16 and "no candidate matmul ran" in fallback.note


@pytest.mark.parametrize("forced", ["float32", "bfloat16", "float16"])
def test_dtype_flag_forces_without_measuring(forced):
    m = timings(float32=0.001, bfloat16=0.001, float16=0.001)
    choice = choose_dtype(forced, "bfloat16", "cpu", measure=m)
    assert choice.dtype is getattr(torch, forced) and m.calls == [] and "forced" in choice.note


def test_allowed_dtypes_are_lossless_for_the_checkpoint():
    assert allowed_dtypes("bfloat16") == ("bfloat16", "float32")
    assert allowed_dtypes("float16") == ("float16", "float32")
    assert allowed_dtypes("float32") == allowed_dtypes(None) == ("float32",)


def test_the_real_probe_times_a_matmul_and_the_engine_reports_its_choice():
    t = time_matmul_s("float32", "cpu")
    assert t is not None and 0 < t < 5
    engine = LLMEngine(EngineConfig(model="tiny"))          # tiny declares no dtype: float32, unmeasured
    assert engine.stats().dtype == "float32" and "nothing to measure" in engine.stats().dtype_note
    small = PRESETS["small"]
    assert small.torch_dtype == "bfloat16"                    # the benchmark preset is measured
    choice = choose_dtype("auto", small.torch_dtype, "cpu")
    assert choice.note.startswith(choice.name + ": ") and "GFLOP/s" in choice.note
    assert set(choice.timings_s) == {"bfloat16", "float32"} and choice.timings_s[choice.name] is not None


def test_reused_dummy_weights_are_the_same_numbers_and_a_copy():
    from triage.reference_engine.models.loader import reuse_dummy_weights

    fresh = LLMEngine(EngineConfig(model="tiny", seed=3)).runner.model
    with reuse_dummy_weights():
        first = LLMEngine(EngineConfig(model="tiny", seed=3)).runner.model
        second = LLMEngine(EngineConfig(model="tiny", seed=3)).runner.model
        other_seed = LLMEngine(EngineConfig(model="tiny", seed=4)).runner.model
    w = "model.layers.0.mlp.up_proj.weight"
    params = [dict(m.named_parameters())[w] for m in (fresh, first, second, other_seed)]
    assert torch.equal(params[0], params[1]) and torch.equal(params[1], params[2])
    assert params[1].data_ptr() != params[2].data_ptr() and not torch.equal(params[2], params[3])
