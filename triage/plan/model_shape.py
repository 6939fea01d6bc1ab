"""A model's shape, as planning needs it, read from a Hugging Face config.json (or a preset).

`resolve_model("llama-3.1-70b" | "/models/my-llama" | "/models/my-llama/config.json")` returns a
ModelShape. Parameter counts are computed from the shape (embeddings, attention, MLP or experts,
norms), so a local config needs no extra metadata. MHA, GQA, MQA, MLA (DeepSeek), sliding-window
layers (Mistral v0.1, Gemma 2/3, Qwen2 with use_sliding_window) and MoE layers are understood.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.core import roofline
from triage.core.errors import UsageError
from triage.core.model_presets import PRESETS
from triage.reference_engine.models.model_config import PRESETS as ENGINE_PRESETS

# config.json spells the same thing in several ways across model families.
_ALIASES: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim", "hidden_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
}
_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "vocab_size")
# Families whose MLP is two matrices (up, down) rather than gated (gate, up, down).
_UNGATED_MLP = frozenset({"gpt2", "gpt_neox", "opt", "falcon", "phi", "bloom", "gpt_bigcode",
                          "starcoder2", "gptj"})


@dataclass(frozen=True, slots=True)
class ModelShape:
    name: str
    source: str                      # "preset" | a config.json path | "engine preset"
    model_type: str
    hf_id: str | None                # what to pass to `vllm serve`
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    gated_mlp: bool = True
    attention_bias: bool = False
    qk_norm: bool = False
    # Multi-head latent attention (DeepSeek V2/V3); kv_lora_rank None means ordinary attention.
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int | None = None
    # Sliding-window attention: how many of the layers use a window, and its size in tokens.
    sliding_window_tokens: int | None = None
    num_window_layers: int = 0
    # Mixture of experts: routed experts per MoE layer (0 = dense), shared experts, dense layers.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    num_dense_layers: int = 0

    # ----- attention kind and KV cache -----
    @property
    def attention_kind(self) -> str:
        if self.kv_lora_rank is not None:
            return "MLA"
        if self.num_kv_heads == self.num_attention_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.kv_lora_rank is not None else self.head_dim

    @property
    def attn_v_head_dim(self) -> int:
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim

    def kv_bytes_per_token_per_layer(self, kv_dtype: str) -> float:
        if self.kv_lora_rank is not None:
            return roofline.mla_kv_bytes_per_token(1, self.kv_lora_rank, self.qk_rope_head_dim, kv_dtype)
        return roofline.kv_bytes_per_token(1, self.num_kv_heads, self.head_dim, kv_dtype)

    def kv_bytes_per_token(self, kv_dtype: str) -> float:
        """Bytes one token of context costs across all layers (window layers included)."""
        return self.num_layers * self.kv_bytes_per_token_per_layer(kv_dtype)

    def kv_bytes_per_token_split(self, kv_dtype: str) -> tuple[float, float]:
        """Bytes one token of context costs in the full-attention layers and in the sliding-window layers."""
        per_layer = self.kv_bytes_per_token_per_layer(kv_dtype)
        return (self.num_layers - self.num_window_layers) * per_layer, self.num_window_layers * per_layer

    def kv_bytes_per_sequence(self, context_tokens: int, kv_dtype: str) -> float:
        full, window = self.kv_bytes_per_token_split(kv_dtype)
        return roofline.kv_bytes_per_sequence(context_tokens, full, window, self.sliding_window_tokens)

    # ----- parameter counts -----
    def _attention_params(self) -> int:
        h, nh = self.hidden_size, self.num_attention_heads
        if self.kv_lora_rank is not None:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * nh * qk
            else:
                q = h * nh * qk
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
                  + self.kv_lora_rank * nh * (self.qk_nope_head_dim + self.attn_v_head_dim))
            return q + kv + nh * self.attn_v_head_dim * h
        d, kvh = self.head_dim, self.num_kv_heads
        p = h * nh * d + 2 * h * kvh * d + nh * d * h
        if self.attention_bias:
            p += nh * d + 2 * kvh * d
        if self.qk_norm:
            p += 2 * d
        return p

    def _mlp_params(self, inner: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden_size * inner

    def _moe_layer_params(self, num_experts_counted: float) -> float:
        router = self.hidden_size * self.num_experts
        experts = num_experts_counted * self._mlp_params(self.moe_intermediate_size)
        shared = self.num_shared_experts * self._mlp_params(self.moe_intermediate_size)
        shared += self._mlp_params(self.shared_expert_intermediate_size) if self.shared_expert_intermediate_size else 0
        return router + experts + shared

    @property
    def num_embedding_params(self) -> int:
        """Embedding plus LM head (once when tied) plus norms: what quantization leaves in 16 bit."""
        emb = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)
        return emb + self.hidden_size * (2 * self.num_layers + 1)

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    def _params(self, num_experts_counted: float) -> float:
        per_layer_attn = self._attention_params()
        dense_layers = self.num_layers - self.num_moe_layers
        total = self.num_embedding_params + self.num_layers * per_layer_attn
        total += dense_layers * self._mlp_params(self.intermediate_size)
        total += self.num_moe_layers * self._moe_layer_params(num_experts_counted)
        return total

    @property
    def num_params(self) -> int:
        return int(self._params(self.num_experts))

    @property
    def num_active_params(self) -> int:
        """Parameters one token touches: all of a dense model; shared parts + top-k experts of a MoE."""
        return int(self._params(self.num_experts_per_tok)) if self.is_moe else self.num_params

    @property
    def routed_expert_params(self) -> int:
        """All routed-expert weights (what a decode step reads only a fraction of)."""
        return self.num_moe_layers * self.num_experts * self._mlp_params(self.moe_intermediate_size)

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.update(attention_kind=self.attention_kind, num_params=self.num_params,
                 num_active_params=self.num_active_params, num_embedding_params=self.num_embedding_params)
        return d


def _first(cfg: dict[str, Any], field: str) -> Any:
    for key in _ALIASES[field]:
        if cfg.get(key) is not None:
            return cfg[key]
    return None


def _int(cfg: dict[str, Any], key: str, default: int = 0) -> int:
    v = cfg.get(key)
    return default if v is None else int(v)


def _sliding(cfg: dict[str, Any], model_type: str, num_layers: int) -> tuple[int | None, int]:
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        n = sum(1 for t in layer_types if "sliding" in str(t))
        return (int(window), n) if window and n else (None, 0)
    if not window or cfg.get("use_sliding_window") is False:
        return None, 0
    window = int(window)
    if model_type == "gemma2":                   # even layers are local
        return window, (num_layers + 1) // 2
    if model_type.startswith("gemma3"):          # every `pattern`-th layer is global
        pattern = _int(cfg, "sliding_window_pattern", 6)
        return window, num_layers - num_layers // pattern
    if "max_window_layers" in cfg:               # Qwen2: layers from max_window_layers on use SWA
        return window, max(num_layers - _int(cfg, "max_window_layers"), 0)
    return window, num_layers


def _moe(cfg: dict[str, Any], num_layers: int, intermediate: int) -> dict[str, int]:
    num_experts = _int(cfg, "n_routed_experts") or _int(cfg, "num_experts") or _int(cfg, "num_local_experts")
    if not num_experts:
        return {}
    moe_inter = _int(cfg, "moe_intermediate_size") or intermediate
    dense = _int(cfg, "first_k_dense_replace")
    mlp_only = cfg.get("mlp_only_layers") or []
    step = _int(cfg, "decoder_sparse_step", 1) or 1
    if step > 1:   # Qwen MoE: every `step`-th layer is sparse
        dense = sum(1 for i in range(num_layers) if (i + 1) % step != 0 or i in mlp_only)
    elif mlp_only:
        dense = len(set(mlp_only))
    return {
        "num_experts": num_experts, "num_experts_per_tok": _int(cfg, "num_experts_per_tok", 1),
        "moe_intermediate_size": moe_inter, "num_shared_experts": _int(cfg, "n_shared_experts"),
        "shared_expert_intermediate_size": _int(cfg, "shared_expert_intermediate_size"),
        "num_dense_layers": dense,
    }


def shape_from_hf_config(cfg: dict[str, Any], name: str, source: str, hf_id: str | None = None) -> ModelShape:
    """Read a config.json dict. Missing required fields raise UsageError naming them."""
    if isinstance(cfg.get("text_config"), dict):      # multimodal wrappers keep the LM inside
        cfg = {**cfg, **cfg["text_config"]}
    missing = [f for f in _REQUIRED if _first(cfg, f) is None]
    if missing:
        keys = "; ".join(f"{f} (as {' or '.join(_ALIASES[f][:2])})" for f in missing)
        raise UsageError(f"model config {source} is missing {keys}. Pass a Hugging Face config.json "
                         f"of a decoder-only LLM, or one of the presets: {', '.join(PRESETS)}")
    num_layers = int(_first(cfg, "num_layers"))
    hidden = int(_first(cfg, "hidden_size"))
    heads = int(_first(cfg, "num_attention_heads"))
    kv_heads = int(_first(cfg, "num_kv_heads") or heads)
    model_type = str(cfg.get("model_type") or "unknown")
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    gated = model_type not in _UNGATED_MLP
    inter = _first(cfg, "intermediate_size")
    inter = int(inter) if inter is not None else 4 * hidden
    if min(num_layers, hidden, heads, kv_heads, head_dim) <= 0 or heads % kv_heads:
        raise UsageError(f"model config {source}: layers, hidden size and heads must be positive and "
                         f"the attention heads ({heads}) a multiple of the KV heads ({kv_heads})")
    window, num_window_layers = _sliding(cfg, model_type, num_layers)
    mla = {}
    if cfg.get("kv_lora_rank"):
        mla = {"kv_lora_rank": int(cfg["kv_lora_rank"]), "q_lora_rank": cfg.get("q_lora_rank"),
               "qk_rope_head_dim": _int(cfg, "qk_rope_head_dim"),
               "qk_nope_head_dim": _int(cfg, "qk_nope_head_dim"), "v_head_dim": _int(cfg, "v_head_dim")}
    max_pos = cfg.get("max_position_embeddings") or cfg.get("n_positions") or cfg.get("max_seq_len")
    return ModelShape(
        name=name, source=source, model_type=model_type, hf_id=hf_id,
        num_layers=num_layers, hidden_size=hidden, intermediate_size=inter,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        vocab_size=int(_first(cfg, "vocab_size")),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        max_position_embeddings=int(max_pos) if max_pos else None,
        gated_mlp=gated, attention_bias=bool(cfg.get("attention_bias") or model_type == "qwen2"),
        qk_norm=model_type.startswith("qwen3"),
        sliding_window_tokens=window, num_window_layers=num_window_layers,
        **mla, **_moe(cfg, num_layers, inter),
    )


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read model config {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"model config {path} is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"model config {path} is not a JSON object")
    return data


def _engine_preset(name: str) -> ModelShape | None:
    """The bundled reference engine's presets ("tiny", "small")."""
    cfg = ENGINE_PRESETS.get(name)
    if cfg is None:
        return None
    return shape_from_hf_config(dataclasses.asdict(cfg), name=name, source="reference engine preset")


def preset_names() -> list[str]:
    return list(PRESETS)


def resolve_model(arg: str) -> ModelShape:
    """A preset name, a directory holding config.json, or a config.json path."""
    key = arg.strip().lower()
    if key in PRESETS:
        cfg = dict(PRESETS[key])
        hf_id = cfg.pop("_hf_id", None)
        return shape_from_hf_config(cfg, name=key, source="preset", hf_id=hf_id)
    by_id = {str(c.get("_hf_id", "")).lower(): k for k, c in PRESETS.items()}
    if key in by_id:
        return resolve_model(by_id[key])
    path = Path(arg).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise UsageError(f"{path} has no config.json; point --model at a Hugging Face model "
                             "directory, a config.json, or a preset")
        return shape_from_hf_config(_read_config(config), name=path.name, source=str(config), hf_id=str(path))
    if path.is_file():
        return shape_from_hf_config(_read_config(path), name=path.parent.name or path.stem,
                                    source=str(path), hf_id=str(path.parent))
    engine = _engine_preset(arg)
    if engine is not None:
        return engine
    raise UsageError(f"unknown model {arg!r}: not a preset, a directory or a file. Presets: "
                     f"{', '.join(PRESETS)} (or a Hugging Face id of one of them)")


def model_for_served_name(served: str | None) -> ModelShape | None:
    """The preset whose Hugging Face id (or its last path part) matches a served model name."""
    if not served:
        return None
    s = served.strip().lower()
    for key, cfg in PRESETS.items():
        hf = str(cfg.get("_hf_id", "")).lower()
        if s in (key, hf, hf.rsplit("/", 1)[-1]) or s.rsplit("/", 1)[-1] == hf.rsplit("/", 1)[-1]:
            return resolve_model(key)
    path = Path(served).expanduser()
    if (path / "config.json").is_file():
        return resolve_model(str(path))
    return _engine_preset(served)
