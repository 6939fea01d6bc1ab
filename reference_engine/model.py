"""A Llama-family decoder in plain PyTorch: RMSNorm, RoPE (default / linear / llama3 scaling), GQA,
SwiGLU, tied or untied embeddings, plus the Qwen2 q/k/v bias and Qwen3 q/k norm variants.

Module names follow Hugging Face's, except that q/k/v and gate/up are fused into one matrix each
(``qkv_proj``, ``gate_up_proj``: fewer, larger matmuls), as vLLM does. ``hf_state_dict`` presents the
parameters under HF names as views, which is how checkpoints load and export. The model works on a flattened ragged batch
of tokens; attention goes through a backend and the paged KV cache (``forward``), or, for reference,
through plain causal attention over one sequence with no cache (``forward_full``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from reference_engine.attention.base import AttentionBackend, AttentionMetadata
from reference_engine.config import ModelConfig
from triage.errors import EngineError


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    scaling = cfg.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq.float()
    if kind == "linear":
        return (inv_freq / float(scaling["factor"])).float()
    if kind == "llama3":
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        original = float(scaling["original_max_position_embeddings"])
        low_freq_wavelen, high_freq_wavelen = original / low, original / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth = (original / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
        return torch.where(medium, smoothed, scaled).float()
    raise EngineError(f"rope_scaling type '{kind}' is not supported (supported: default, linear, llama3)")


class RotaryEmbedding(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float().unsqueeze(-1) * self.inv_freq      # [T, d/2]
        return freqs.cos(), freqs.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF's rotate-half convention on ``[T, H, d]``; computed in fp32."""
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.scale = cfg.head_dim ** -0.5
        h = cfg.hidden_size
        self.qkv_sizes = [self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim,
                          self.num_kv_heads * self.head_dim]
        self.qkv_proj = nn.Linear(h, sum(self.qkv_sizes), bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=cfg.o_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x, cos, sin, kv_cache, meta, slot_mapping, backend) -> torch.Tensor:
        t = x.shape[0]
        hq, hkv = self.num_heads, self.num_kv_heads
        qkv = self.qkv_proj(x).view(t, hq + 2 * hkv, self.head_dim)
        qk, v = qkv[:, :hq + hkv], qkv[:, hq + hkv:]
        if self.q_norm is not None:
            qk = torch.cat((self.q_norm(qk[:, :hq]), self.k_norm(qk[:, hq:])), dim=1)
        qk = apply_rope(qk, cos, sin)                   # q and k rotated in one pass
        q, k = qk[:, :hq], qk[:, hq:]
        if kv_cache is None:               # reference path: one sequence, no cache
            o = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                               v.transpose(0, 1).unsqueeze(0), is_causal=True,
                                               scale=self.scale, enable_gqa=True)[0].transpose(0, 1)
        else:
            k_cache, v_cache = kv_cache
            flat_k = k_cache.view(-1, hkv, self.head_dim)
            flat_v = v_cache.view(-1, hkv, self.head_dim)
            flat_k.index_copy_(0, slot_mapping, k.to(flat_k.dtype))
            flat_v.index_copy_(0, slot_mapping, v.to(flat_v.dtype))
            o = backend(q.contiguous(), k_cache, v_cache, meta, self.scale)
        return self.o_proj(o.reshape(t, hq * self.head_dim))


class LlamaMLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.intermediate_size = cfg.intermediate_size
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, kv_cache, meta, slot_mapping, backend):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv_cache, meta, slot_mapping, backend)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(cfg)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def hidden_states(self, input_ids: torch.Tensor, positions: torch.Tensor,
                      kv_caches: torch.Tensor | None = None, meta: AttentionMetadata | None = None,
                      slot_mapping: torch.Tensor | None = None,
                      backend: AttentionBackend | None = None) -> torch.Tensor:
        """``input_ids``/``positions``: ``[T]``. ``kv_caches``: ``[L, 2, blocks, block_size, H_kv, d]``."""
        x = self.model.embed_tokens(input_ids)
        cos, sin = self.model.rotary_emb(positions)
        for i, layer in enumerate(self.model.layers):
            cache = None if kv_caches is None else (kv_caches[i, 0], kv_caches[i, 1])
            x = layer(x, cos, sin, cache, meta, slot_mapping, backend)
        return self.model.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden).float()

    @torch.inference_mode()
    def forward_full(self, input_ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Reference: logits ``[T, vocab]`` for one sequence by a plain causal forward, no KV cache."""
        device = self.lm_head.weight.device
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
        positions = torch.arange(ids.shape[0], device=device)
        return self.logits(self.hidden_states(ids, positions))


_FUSED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
          "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def hf_state_dict(model: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    """Parameters under Hugging Face names. Fused matrices appear as their q/k/v or gate/up parts,
    as *views*: copying into them loads a checkpoint, reading them exports one."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if isinstance(tensor, nn.Parameter):
            tensor = tensor.data
        for fused, parts in _FUSED.items():
            marker = f".{fused}."
            if marker in name:
                prefix, suffix = name.split(marker)
                layer = model.get_submodule(prefix + "." + fused.split(".")[0])
                sizes = layer.qkv_sizes if fused.endswith("qkv_proj") else [layer.intermediate_size] * 2
                for part, view in zip(parts, tensor.split(sizes, dim=0), strict=True):
                    out[f"{prefix}.{part}.{suffix}"] = view
                break
        else:
            out[name] = tensor
    if model.config.tie_word_embeddings:
        out.pop("lm_head.weight", None)
    return out
