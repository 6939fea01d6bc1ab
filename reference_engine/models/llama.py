"""A Llama-family decoder in plain PyTorch: RMSNorm, RoPE (default / linear / llama3 scaling), GQA,
SwiGLU, tied or untied embeddings, plus the Qwen2 q/k/v bias and Qwen3 q/k norm variants.

Module and parameter names equal Hugging Face's (``model.layers.0.self_attn.q_proj.weight`` ...), so
checkpoints load by name and quantization handlers can swap any ``nn.Linear`` by its HF name. The
projections stay unfused for that reason. The model works on a flattened ragged batch
of tokens; attention goes through the step's ``attend`` (engine/step_attention.py: the paged KV cache and a
backend), or, for reference, through plain causal attention over one sequence with no cache (``forward_full``).
This is the one forward: the compiled decode step (engine/compiled_step.py) traces it as it is.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from triage.core.errors import EngineError
from triage.reference_engine.models.model_config import ModelConfig

# attend(q, k, v, layer_index, scale) -> o: stores the layer's new K/V and attends over its cache.
Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, float], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:        # the reduction's result updated in place: fewer temporaries, same bits
            return (x * x.pow(2).mean(-1, keepdim=True).add_(self.eps).rsqrt_()).mul_(self.weight)
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
        """``(cos, sin)``, each ``[T, 1, d]`` and computed once per step for every layer: ``cos`` is the
        ``[T, d/2]`` cosines repeated twice, ``sin`` the sines with the first half negated, so that
        apply_rope is two multiplies and an add on the whole head (see there)."""
        freqs = positions.float().unsqueeze(-1) * self.inv_freq      # [T, d/2]
        cos, sin = freqs.cos(), freqs.sin()
        return torch.cat((cos, cos), dim=-1).unsqueeze(1), torch.cat((-sin, sin), dim=-1).unsqueeze(1)


ROPE_MATMUL_MAX_TOKENS = 16     # steps of at most this many tokens rotate by one [T, d, d] matmul (decode)


def rope_matrix(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``[T, d, d]`` with ``x @ M[t] == x * cos[t] + roll(x, d/2) * sin[t]`` for one token's ``[H, d]``: ``cos`` on
    the diagonal, ``sin`` on the diagonal shifted down by d/2. Built once per step; a decode step then rotates
    q and k with one small matmul each instead of four elementwise ops (the zeros add nothing; the sum may
    round differently from the elementwise form by an ulp)."""
    half = cos.shape[-1] // 2
    return torch.diag_embed(cos[:, 0]) + torch.diag_embed(sin[:, 0]).roll(half, dims=-2)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor | None) -> torch.Tensor:
    """HF's rotate-half convention on ``[T, H, d]``, computed in fp32, with ``cos``/``sin`` as RotaryEmbedding
    returns them: ``x * cos + roll(x, d/2) * sin`` is ``cat(x1 c - x2 s, x2 c + x1 s)`` term by term (the
    same products and sums, so the same bits) in three ops instead of nine. With ``sin=None``, ``cos`` is
    rope_matrix's ``[T, d, d]`` and the rotation one batched matmul."""
    xf = x.float()
    if sin is None:
        return torch.bmm(xf, cos).to(x.dtype)
    out = xf * cos + xf.roll(x.shape[-1] // 2, dims=-1) * sin
    return out.to(x.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_index: int):
        super().__init__()
        self.layer_index = layer_index
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.scale = cfg.head_dim ** -0.5
        h = cfg.hidden_size
        self.q_proj = nn.Linear(h, self.num_heads * self.head_dim, bias=cfg.qkv_bias)
        self.k_proj = nn.Linear(h, self.num_kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.v_proj = nn.Linear(h, self.num_kv_heads * self.head_dim, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=cfg.o_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x, cos, sin, attend: Attend | None) -> torch.Tensor:
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(t, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if attend is None:                 # reference path: one sequence, no cache
            o = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k.transpose(0, 1).unsqueeze(0),
                                               v.transpose(0, 1).unsqueeze(0), is_causal=True,
                                               scale=self.scale, enable_gqa=True)[0].transpose(0, 1)
        else:
            o = attend(q, k, v, self.layer_index, self.scale)
        return self.o_proj(o.reshape(t, self.num_heads * self.head_dim))


class LlamaMLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_index: int):
        super().__init__()
        self.self_attn = LlamaAttention(cfg, layer_index)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, attend: Attend | None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attend)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
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
                      attend: Attend | None = None) -> torch.Tensor:
        """``input_ids``/``positions``: ``[T]``. ``attend``: the step's attention over the KV cache
        (engine/step_attention.py); None attends causally over these tokens alone (one sequence)."""
        x = self.model.embed_tokens(input_ids)
        cos, sin = self.model.rotary_emb(positions)
        if positions.shape[0] <= ROPE_MATMUL_MAX_TOKENS:
            cos, sin = rope_matrix(cos, sin), None
        for layer in self.model.layers:
            x = layer(x, cos, sin, attend)
        return self.model.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden).float()

    @torch.inference_mode()
    def forward_full(self, input_ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Reference: logits ``[T, vocab]`` for one sequence by a plain causal forward, no KV cache."""
        device = self.model.embed_tokens.weight.device      # a quantized lm_head has no ``.weight``
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
        positions = torch.arange(ids.shape[0], device=device)
        return self.logits(self.hidden_states(ids, positions))


def hf_state_dict(model: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    """Parameters under Hugging Face names (the tied ``lm_head.weight`` left out), as the tensors
    themselves: copying into them loads a checkpoint, reading them exports one."""
    out = {name: tensor for name, tensor in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        out.pop("lm_head.weight", None)
    return out
