"""Logits equal Hugging Face transformers on the same weights, loaded through our safetensors loader.

transformers is a test-only dependency: it builds and saves a tiny random model; the engine never
imports it.
"""
from __future__ import annotations

import json

import pytest
import torch

from tests.engine_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from triage.core.errors import EngineError
from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams, load_model_config

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow          # importing transformers alone takes several seconds

PROMPT = [1, 17, 42, 99, 3, 250, 7, 7, 64, 128, 5, 11, 200, 31, 2, 9, 77, 150, 12, 40]

COMMON = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=1,
              eos_token_id=2)


def _save(tmp_path, kind: str, **overrides):
    torch.manual_seed(0)
    if kind == "llama":
        cfg = transformers.LlamaConfig(**{**COMMON, **overrides})
        model = transformers.LlamaForCausalLM(cfg)
    elif kind == "qwen2":
        cfg = transformers.Qwen2Config(**{**COMMON, **overrides})
        model = transformers.Qwen2ForCausalLM(cfg)
    else:
        cfg = transformers.Qwen3Config(**{**COMMON, "head_dim": 16, **overrides})
        model = transformers.Qwen3ForCausalLM(cfg)
    with torch.no_grad():                        # HF's init is tiny; widen it so differences would show
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model = model.float().eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    return model


def _hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


@pytest.mark.parametrize("kind, overrides", [
    ("llama", {"tie_word_embeddings": False,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}),
    ("llama", {"tie_word_embeddings": True, "rope_theta": 500000.0}),
    ("qwen2", {"tie_word_embeddings": True}),
    ("qwen3", {"tie_word_embeddings": False}),
])
def test_full_forward_logits_match_transformers(tmp_path, kind, overrides):
    hf = _save(tmp_path, kind, **overrides)
    engine = LLMEngine(EngineConfig(model=str(tmp_path), dtype="float32"))
    assert engine.load_format == "safetensors"
    ours = engine.runner.model.forward_full(PROMPT)
    torch.testing.assert_close(ours, _hf_logits(hf, PROMPT), atol=1e-4, rtol=1e-4)


def test_paged_engine_greedy_matches_transformers_generate(tmp_path):
    hf = _save(tmp_path, "llama", tie_word_embeddings=False)
    engine = LLMEngine(EngineConfig(model=str(tmp_path), block_size=4, max_num_batched_tokens=7))
    ours = engine.generate([PROMPT], SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))[0]
    with torch.no_grad():
        ref = hf.generate(torch.tensor([PROMPT]), max_new_tokens=10, do_sample=False, eos_token_id=None,
                          pad_token_id=0, min_new_tokens=10)[0, len(PROMPT):].tolist()
    assert ours.output_token_ids == ref


def test_bf16_checkpoint_dtype_auto_is_explained(tmp_path):
    hf = _save(tmp_path, "llama")
    hf.to(torch.bfloat16).save_pretrained(tmp_path, safe_serialization=True)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert (cfg.get("torch_dtype") or cfg.get("dtype")) == "bfloat16"
    engine = LLMEngine(EngineConfig(model=str(tmp_path)))
    stats = engine.stats()
    assert "bfloat16" in stats.dtype_note and "GFLOP/s" in stats.dtype_note    # the measured rates
    assert stats.dtype in ("float32", "bfloat16")
    if stats.dtype == "float32":
        assert "upcast exactly" in stats.dtype_note


def test_model_config_from_config_json(tmp_path):
    _save(tmp_path, "qwen2", tie_word_embeddings=True)
    mc = load_model_config(str(tmp_path / "config.json"))
    assert (mc.model_type, mc.qkv_bias, mc.tie_word_embeddings, mc.num_key_value_heads) == ("qwen2", True, True, 2)
    hf_params = sum(p.numel() for p in transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        **{**COMMON, "tie_word_embeddings": True})).parameters())
    assert mc.num_params == hf_params


def test_mismatched_checkpoint_is_a_clear_error(tmp_path):
    _save(tmp_path, "llama")
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["intermediate_size"] = 96
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EngineError, match="shape"):
        LLMEngine(EngineConfig(model=str(tmp_path)))
    with pytest.raises(EngineError, match="needs a local model directory"):
        LLMEngine(EngineConfig(model="tiny", load_format="safetensors"))


def test_local_tokenizer_json_is_used(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    _save(tmp_path, "llama")
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate("the cat sat on a mat".split())}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    engine = LLMEngine(EngineConfig(model=str(tmp_path)))
    assert engine.tokenizer.kind == "tokenizer.json"
    assert engine.tokenizer.encode("the cat sat") == [3, 4, 5]
    out = engine.generate(["the cat sat"], SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True))[0]
    assert out.prompt_token_ids == [3, 4, 5]
    assert out.text == engine.tokenizer.decode(out.output_token_ids)
