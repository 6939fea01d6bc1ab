"""Model configuration. Torch-free: the planner and the scheduler tests import this.

A ModelConfig is built from a named preset or from an HF-style ``config.json``. The serving knobs
live in ``engine/engine_config.py``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.core.errors import EngineError

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Shapes of a Llama-family decoder (RMSNorm, RoPE, GQA, SwiGLU)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    torch_dtype: str | None = None
    model_type: str = "llama"
    qkv_bias: bool = False          # Qwen2: bias on q/k/v projections
    o_bias: bool = False            # Llama attention_bias=True puts a bias on o_proj too
    qk_norm: bool = False           # Qwen3: RMSNorm over head_dim on q and k
    name: str = "custom"

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        if self.eos_token_id is None:
            return ()
        if isinstance(self.eos_token_id, int):
            return (self.eos_token_id,)
        return tuple(self.eos_token_id)

    @property
    def num_params(self) -> int:
        h, i, d = self.hidden_size, self.intermediate_size, self.head_dim
        q_out = self.num_attention_heads * d
        kv_out = self.num_key_value_heads * d
        attn = h * q_out + 2 * h * kv_out + q_out * h
        if self.qkv_bias:
            attn += q_out + 2 * kv_out
        if self.o_bias:
            attn += h
        if self.qk_norm:
            attn += 2 * d
        mlp = 3 * h * i
        per_layer = attn + mlp + 2 * h
        embed = self.vocab_size * h
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return embed + self.num_hidden_layers * per_layer + h + head

    def weight_bytes(self, dtype_bytes: float) -> int:
        return int(self.num_params * dtype_bytes)

    def kv_bytes_per_token(self, dtype_bytes: float) -> int:
        """K and V for one token across all layers."""
        return int(2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * dtype_bytes)

    def flops_per_token(self) -> int:
        """Forward FLOPs per token from the matmuls (2 * params touched), attention excluded."""
        embedding_lookup = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return 2 * (self.num_params - embedding_lookup)


def _llama3_scaling(factor: float, original: int) -> dict[str, Any]:
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": original}


PRESETS: dict[str, ModelConfig] = {
    # Tests: 2 layers, hidden 64, GQA 4:2, byte-level vocabulary (256 bytes + BOS + EOS).
    "tiny": ModelConfig(vocab_size=258, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                        max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                        tie_word_embeddings=False, bos_token_id=256, eos_token_id=257, name="tiny"),
    # CPU benchmarks: about 100M parameters, declared bfloat16 like the public checkpoints, so that the
    # engine measures bf16 against an exact fp32 upcast (host/dtype_choice.py); its generated weights are bf16 values.
    "small": ModelConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                         num_attention_heads=12, num_key_value_heads=4, head_dim=64,
                         max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=10000.0,
                         tie_word_embeddings=True, bos_token_id=256, eos_token_id=257, torch_dtype="bfloat16",
                         name="small"),
    # Shapes of public models, for planning (weights are never downloaded).
    "llama-3.1-8b": ModelConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                                num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                head_dim=128, max_position_embeddings=131072, rms_norm_eps=1e-5,
                                rope_theta=500000.0, rope_scaling=_llama3_scaling(8.0, 8192),
                                tie_word_embeddings=False, bos_token_id=128000,
                                eos_token_id=[128001, 128008, 128009], torch_dtype="bfloat16",
                                name="llama-3.1-8b"),
    "llama-3.1-70b": ModelConfig(vocab_size=128256, hidden_size=8192, intermediate_size=28672,
                                 num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                                 head_dim=128, max_position_embeddings=131072, rms_norm_eps=1e-5,
                                 rope_theta=500000.0, rope_scaling=_llama3_scaling(8.0, 8192),
                                 tie_word_embeddings=False, bos_token_id=128000,
                                 eos_token_id=[128001, 128008, 128009], torch_dtype="bfloat16",
                                 name="llama-3.1-70b"),
    "llama-3.2-1b": ModelConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                                num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
                                rope_theta=500000.0, rope_scaling=_llama3_scaling(32.0, 8192),
                                tie_word_embeddings=True, bos_token_id=128000,
                                eos_token_id=[128001, 128008, 128009], torch_dtype="bfloat16",
                                name="llama-3.2-1b"),
    "qwen2.5-0.5b": ModelConfig(vocab_size=151936, hidden_size=896, intermediate_size=4864,
                                num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                head_dim=64, max_position_embeddings=32768, rms_norm_eps=1e-6,
                                rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=151643,
                                eos_token_id=151645, torch_dtype="bfloat16", model_type="qwen2",
                                qkv_bias=True, name="qwen2.5-0.5b"),
    "qwen2.5-7b": ModelConfig(vocab_size=152064, hidden_size=3584, intermediate_size=18944,
                              num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                              head_dim=128, max_position_embeddings=32768, rms_norm_eps=1e-6,
                              rope_theta=1000000.0, tie_word_embeddings=False, bos_token_id=151643,
                              eos_token_id=151645, torch_dtype="bfloat16", model_type="qwen2",
                              qkv_bias=True, name="qwen2.5-7b"),
    "qwen3-0.6b": ModelConfig(vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                              num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                              head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                              rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=151643,
                              eos_token_id=151645, torch_dtype="bfloat16", model_type="qwen3",
                              qk_norm=True, name="qwen3-0.6b"),
    "qwen3-8b": ModelConfig(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                            num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                            head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                            rope_theta=1000000.0, tie_word_embeddings=False, bos_token_id=151643,
                            eos_token_id=151645, torch_dtype="bfloat16", model_type="qwen3",
                            qk_norm=True, name="qwen3-8b"),
}


def _require(raw: dict[str, Any], key: str, source: str) -> Any:
    if key not in raw:
        raise EngineError(f"{source} has no '{key}'; a Llama-family config.json needs it")
    return raw[key]


def model_config_from_dict(raw: dict[str, Any], source: str = "config.json", name: str = "custom") -> ModelConfig:
    """Build a ModelConfig from the fields of an HF ``config.json``."""
    model_type = str(raw.get("model_type", "llama"))
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise EngineError(f"{source}: model_type '{model_type}' is not supported by the reference engine; "
                          f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    hidden = int(_require(raw, "hidden_size", source))
    heads = int(_require(raw, "num_attention_heads", source))
    head_dim = raw.get("head_dim") or hidden // heads
    # transformers < 5 writes rope_theta + rope_scaling; 5.x writes rope_parameters holding both.
    rope_scaling = raw.get("rope_scaling")
    rope_theta = raw.get("rope_theta", 10000.0)
    rope_parameters = raw.get("rope_parameters")
    if isinstance(rope_parameters, dict):
        rope_theta = rope_parameters.get("rope_theta", rope_theta)
        if rope_parameters.get("rope_type", "default") != "default":
            rope_scaling = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
    if rope_scaling is not None and not isinstance(rope_scaling, dict):
        raise EngineError(f"{source}: rope_scaling must be an object or null, got {rope_scaling!r}")
    if raw.get("use_sliding_window") or (model_type == "mistral" and raw.get("sliding_window")):
        raise EngineError(f"{source}: sliding-window attention is not supported by the reference engine")
    attn_bias = bool(raw.get("attention_bias", False))
    return ModelConfig(
        vocab_size=int(_require(raw, "vocab_size", source)),
        hidden_size=hidden,
        intermediate_size=int(_require(raw, "intermediate_size", source)),
        num_hidden_layers=int(_require(raw, "num_hidden_layers", source)),
        num_attention_heads=heads,
        num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
        head_dim=int(head_dim),
        max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=float(rope_theta),
        rope_scaling=dict(rope_scaling) if rope_scaling else None,
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        bos_token_id=raw.get("bos_token_id"),
        eos_token_id=raw.get("eos_token_id"),
        torch_dtype=raw.get("torch_dtype") or raw.get("dtype"),
        model_type=model_type,
        qkv_bias=(model_type == "qwen2") or attn_bias,
        o_bias=attn_bias,
        qk_norm=(model_type == "qwen3"),
        name=name,
    )


def load_model_config(model: str) -> ModelConfig:
    """A preset name, a local model directory, or a path to a ``config.json``."""
    if model in PRESETS:
        return PRESETS[model]
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise EngineError(f"model '{model}' is neither a preset ({', '.join(PRESETS)}) nor a local directory "
                          f"with a config.json; pass a preset name or a path (nothing is downloaded)")
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise EngineError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise EngineError(f"{path} is not a JSON object")
    return model_config_from_dict(raw, source=str(path), name=path.parent.name)


def model_dir(model: str) -> Path | None:
    """The local directory holding weights/tokenizer for ``model``, or None for a preset."""
    if model in PRESETS:
        return None
    path = Path(model).expanduser()
    return path if path.is_dir() else path.parent
