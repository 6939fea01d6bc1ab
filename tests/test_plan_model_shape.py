"""triage/plan/model_shape.py: shapes from config.json and presets; GQA, MHA, MLA, windows, MoE."""
import json
from dataclasses import dataclass

import pytest

from triage.core.errors import UsageError
from triage.core.model_presets import PRESETS
from triage.plan.model_shape import resolve_model, shape_from_hf_config


@pytest.mark.parametrize(("preset", "num_params"), [
    # Hugging Face's published parameter counts for these checkpoints.
    ("llama-3.1-8b", 8_030_261_248),
    ("llama-3.1-70b", 70_553_706_496),
    ("llama-3.1-405b", 405_853_388_800),
    ("llama-2-7b", 6_738_415_616),
    ("mistral-7b", 7_248_023_552),
    ("mixtral-8x7b", 46_702_792_704),
    ("qwen2.5-7b", 7_615_616_512),
    ("qwen3-8b", 8_190_735_360),
])
def test_parameter_count_computed_from_shape(preset, num_params):
    assert resolve_model(preset).num_params == num_params


def test_moe_active_parameters():
    mixtral = resolve_model("mixtral-8x7b")
    assert mixtral.num_active_params / 1e9 == pytest.approx(12.9, abs=0.05)
    qwen_moe = resolve_model("qwen3-30b-a3b")
    assert qwen_moe.num_params / 1e9 == pytest.approx(30.5, abs=0.1)
    assert qwen_moe.num_active_params / 1e9 == pytest.approx(3.3, abs=0.1)
    ds = resolve_model("deepseek-v3")
    assert ds.num_params / 1e9 == pytest.approx(671, abs=1)       # 671B without the MTP layer
    assert ds.num_active_params / 1e9 == pytest.approx(37.5, abs=1)


def test_gqa_mha_mla_kv_per_token():
    mha, gqa, mla = resolve_model("llama-2-7b"), resolve_model("llama-3.1-8b"), resolve_model("deepseek-v3")
    assert (mha.attention_kind, gqa.attention_kind, mla.attention_kind) == ("MHA", "GQA", "MLA")
    assert mha.kv_bytes_per_token("bf16") == 2 * 32 * 32 * 128 * 2          # 512 KiB
    assert gqa.kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2           # 128 KiB: 4x less
    assert mla.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2            # 68.6 KiB for a 671B model
    # Seed 004: "DeepSeek's MLA keeps the active KV cache tiny despite being 10x larger".
    assert mla.kv_bytes_per_token("bf16") < resolve_model("llama-3.1-70b").kv_bytes_per_token("bf16") / 4


def test_mqa_is_one_kv_head():
    cfg = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 1,
           "intermediate_size": 512, "vocab_size": 1000}
    assert shape_from_hf_config(cfg, "m", "test").attention_kind == "MQA"


def test_sliding_window_layers():
    gemma = resolve_model("gemma-2-9b")
    assert (gemma.sliding_window_tokens, gemma.num_window_layers) == (4096, 21)
    mistral = resolve_model("mistral-7b-v0.1")
    assert (mistral.sliding_window_tokens, mistral.num_window_layers) == (4096, 32)
    # Every layer windowed: KV per sequence stops growing at 4096 tokens.
    assert mistral.kv_bytes_per_sequence(32768, "bf16") == mistral.kv_bytes_per_sequence(4096, "bf16")
    # Half the layers windowed: past the window only the global half grows.
    grow = gemma.kv_bytes_per_sequence(8192, "bf16") - gemma.kv_bytes_per_sequence(4096, "bf16")
    assert grow == 4096 * 21 * gemma.kv_bytes_per_token_per_layer("bf16")
    full, window = gemma.kv_bytes_per_token_split("bf16")
    assert window == 21 * gemma.kv_bytes_per_token_per_layer("bf16")
    assert full + window == gemma.kv_bytes_per_token("bf16")
    # Qwen configs carry a window but switch it off.
    assert resolve_model("qwen2.5-7b").sliding_window_tokens is None


def test_layer_types_list_decides_windows():
    cfg = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
           "vocab_size": 1000, "sliding_window": 512,
           "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}
    s = shape_from_hf_config(cfg, "m", "test")
    assert (s.sliding_window_tokens, s.num_window_layers) == (512, 2)


def test_config_dir_and_file(tmp_path):
    cfg = {k: v for k, v in PRESETS["llama-3.1-8b"].items() if not k.startswith("_")}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    by_dir = resolve_model(str(tmp_path))
    by_file = resolve_model(str(tmp_path / "config.json"))
    assert by_dir.num_params == by_file.num_params == 8_030_261_248
    assert by_dir.hf_id == str(tmp_path)


def test_nested_text_config():
    inner = {k: v for k, v in PRESETS["qwen3-8b"].items() if not k.startswith("_")}
    s = shape_from_hf_config({"model_type": "wrapper", "text_config": inner}, "vlm", "test")
    assert s.num_layers == 36


def test_missing_fields_are_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 4096, "model_type": "llama"}))
    with pytest.raises(UsageError) as e:
        resolve_model(str(tmp_path))
    msg = str(e.value)
    assert "num_layers" in msg and "num_attention_heads" in msg and "vocab_size" in msg
    assert "llama-3.1-8b" in msg            # lists the presets as a way out


def test_bad_inputs_get_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="Presets: llama-3.2-1b"):
        resolve_model("no-such-model")
    with pytest.raises(UsageError, match="no config.json"):
        resolve_model(str(tmp_path))
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        resolve_model(str(bad))
    with pytest.raises(UsageError, match="multiple of the KV heads"):
        shape_from_hf_config({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 6,
                              "num_key_value_heads": 4, "vocab_size": 10}, "m", "test")


def test_hf_id_resolves_to_preset():
    assert resolve_model("meta-llama/Llama-3.1-70B-Instruct").name == "llama-3.1-70b"


def test_reference_engine_presets_are_used_when_installed(monkeypatch):
    @dataclass
    class EngineConfig:
        num_layers: int = 4
        hidden_size: int = 256
        intermediate_size: int = 688
        num_attention_heads: int = 8
        num_kv_heads: int = 2
        vocab_size: int = 2048
        max_position_embeddings: int = 2048

    monkeypatch.setattr("triage.plan.model_shape.ENGINE_PRESETS", {"tiny": EngineConfig()})
    tiny = resolve_model("tiny")
    assert (tiny.num_layers, tiny.num_kv_heads, tiny.source) == (4, 2, "reference engine preset")
    with pytest.raises(UsageError):
        resolve_model("huge")


def test_a_diagnosed_reference_server_serving_tiny_resolves_to_the_engine_preset():
    from triage.plan.model_shape import model_for_served_name
    shape = model_for_served_name("tiny")
    assert shape is not None and shape.source == "reference engine preset"
    assert model_for_served_name("no-such-model") is None
