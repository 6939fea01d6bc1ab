"""The decode step's small ops against their plain forms: RoPE (elementwise and one-matmul), RMSNorm, greedy pick."""
from __future__ import annotations

import pytest
import torch

from triage.reference_engine.layers.sampler import sample
from triage.reference_engine.layers.sampling_params import SamplingParams
from triage.reference_engine.models.llama import RMSNorm, RotaryEmbedding, apply_rope, rope_matrix
from triage.reference_engine.models.model_config import ModelConfig


def _hf_rope(x, positions, inv_freq):
    """HF's rotate_half form, spelled out."""
    freqs = positions.float()[:, None] * inv_freq
    cos, sin = torch.cat((freqs, freqs), -1).cos()[:, None], torch.cat((freqs, freqs), -1).sin()[:, None]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated * sin


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("positions", [[0], [7], [4095], [3, 9, 100, 8191]])
def test_rope_elementwise_and_matmul_match_hf(head_dim, positions):
    cfg = ModelConfig(vocab_size=64, hidden_size=head_dim * 4, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=head_dim,
                      max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=10000.0)
    rot = RotaryEmbedding(cfg)
    pos = torch.tensor(positions)
    x = torch.randn(len(positions), 4, head_dim, generator=torch.Generator().manual_seed(len(positions)))
    cos, sin = rot(pos)
    ref = _hf_rope(x, pos, rot.inv_freq)
    torch.testing.assert_close(apply_rope(x, cos, sin), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(apply_rope(x, rope_matrix(cos, sin), None), ref, atol=1e-5, rtol=1e-5)
    half = head_dim // 2       # the elementwise form is the old cat(x1 c - x2 s, x2 c + x1 s), bit for bit
    c, s = cos[..., :half], sin[..., half:]
    x1, x2 = x[..., :half], x[..., half:]
    assert torch.equal(apply_rope(x, cos, sin), torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1))


def test_rmsnorm_fp32_is_the_plain_formula_bit_for_bit():
    norm = RMSNorm(768, 1e-5)
    norm.weight.data = torch.randn(768)
    for shape in [(1, 768), (5, 768), (2, 3, 768)]:
        x = torch.randn(*shape) * 4
        assert torch.equal(norm(x), norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)))


def test_greedy_takes_the_first_maximal_index_like_argmax():
    logits = torch.randint(0, 4, (6, 300)).float()      # many ties per row
    logits[5] = float("-inf")
    params = [SamplingParams(temperature=0.0)] * 6
    assert sample(logits.clone(), params, [None] * 6, [()] * 6) == logits.argmax(-1).tolist()
    banned = [(int(logits[0].argmax()),)] + [()] * 5      # a banned maximum moves the pick, as before
    masked = logits.clone()
    masked[0, banned[0][0]] = float("-inf")
    assert sample(logits.clone(), params, [None] * 6, banned) == masked.argmax(-1).tolist()
