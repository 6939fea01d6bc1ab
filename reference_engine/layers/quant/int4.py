"""INT4 weight-only quantization: group-wise asymmetric, group size 32, 64 or 128.

Storage convention (the one torch's tinygemm int4 kernels use):
    q in [0, 15],  w ≈ (q - 8) * scale + zero,   scale/zero per (output row, group of K).
``zero`` is a float "zero point" (the weight value that q = 8 maps to), not an integer.

Execution paths, picked once when the layer is built:
- ``int4pack_cpu``: ``aten._convert_weight_to_int4pack_for_cpu`` (int32 [N, K] in) and
  ``aten._weight_int4pack_mm_for_cpu``. Its float32 variant is a slow loop (on an AVX2 EPYC: 16 ms for a
  1×768 @ 768×2048 product, against 0.27 ms in bf16 and 0.4 ms for the dense fp32 matmul). A layer
  with ``kernel_dtype = torch.bfloat16`` runs float32 activations through the bf16 kernel and returns
  float32 (int4 storage under fp32 compute; activations and outputs rounded to bf16 on the way).
- ``int4pack_cuda``: ``aten._convert_weight_to_int4pack`` (uint8 [N, K/2] in, torch ≥ 2.5) and
  ``aten._weight_int4pack_mm``; bf16 activations only.
- ``reference``: dequantize to the activation dtype, then ``F.linear``. Used for validation and
  wherever the packed ops are missing or the shape does not fit them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

SUPPORTED_GROUP_SIZES = (32, 64, 128)
_INNER_K_TILES_CUDA = 8  # tinygemm's tile count along K; K must be a multiple of 16 * 8 on CUDA


@dataclass(frozen=True, slots=True)
class Int4Weights:
    """Unpacked group-wise int4 weights: q uint8 [N, K] in 0..15, scale and zero [N, K // group]."""

    q: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    group_size: int

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.q.shape)  # type: ignore[return-value]


def check_group_size(group_size: int, in_features: int) -> None:
    if group_size not in SUPPORTED_GROUP_SIZES:
        raise ValueError(f"int4 group size must be one of {SUPPORTED_GROUP_SIZES}, got {group_size}")
    if in_features % group_size:
        raise ValueError(f"in_features={in_features} is not a multiple of the group size {group_size}")


def quantize_int4_groupwise(weight: torch.Tensor, group_size: int = 128, symmetric: bool = False) -> Int4Weights:
    """[N, K] float weight -> Int4Weights: asymmetric (min/max per group), or symmetric (absmax per group,
    q - 8 in -8..7, zero = 0)."""
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D weight [out, in], got shape {tuple(weight.shape)}")
    n, k = weight.shape
    check_group_size(group_size, k)
    w = weight.detach().float().reshape(n, k // group_size, group_size)
    if symmetric:
        scale = (w.abs().amax(dim=-1, keepdim=True) / 7.0).clamp(min=1e-8)
        q = (w / scale).round().clamp(-8, 7) + 8
        return Int4Weights(q=q.reshape(n, k).to(torch.uint8), scale=scale.squeeze(-1),
                           zero=torch.zeros_like(scale.squeeze(-1)), group_size=group_size)
    w_max = w.amax(dim=-1, keepdim=True)
    w_min = w.amin(dim=-1, keepdim=True)
    scale = ((w_max - w_min) / 15.0).clamp(min=1e-8)
    q = ((w - w_min) / scale).round().clamp(0, 15)
    zero = w_min + 8.0 * scale
    return Int4Weights(q=q.reshape(n, k).to(torch.uint8), scale=scale.squeeze(-1),
                       zero=zero.squeeze(-1), group_size=group_size)


def dequantize_int4(weights: Int4Weights, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The reference path: Int4Weights -> dense [N, K] in ``dtype``."""
    n, k = weights.shape
    g = weights.group_size
    q = weights.q.float().reshape(n, k // g, g)
    w = (q - 8.0) * weights.scale.float().unsqueeze(-1) + weights.zero.float().unsqueeze(-1)
    return w.reshape(n, k).to(dtype)


def pack_scales_and_zeros(weights: Int4Weights, dtype: torch.dtype) -> torch.Tensor:
    """[N, G] scale and zero -> [G, N, 2], the layout the tinygemm kernels read."""
    both = torch.stack([weights.scale, weights.zero], dim=-1)  # [N, G, 2]
    return both.transpose(0, 1).contiguous().to(dtype)


def int4pack_cpu_available() -> bool:
    return hasattr(torch.ops.aten, "_convert_weight_to_int4pack_for_cpu") and hasattr(
        torch.ops.aten, "_weight_int4pack_mm_for_cpu")


def int4pack_cuda_available(device: torch.device) -> bool:
    return (device.type == "cuda" and torch.cuda.is_available()
            and hasattr(torch.ops.aten, "_convert_weight_to_int4pack")
            and hasattr(torch.ops.aten, "_weight_int4pack_mm"))


def choose_int4_path(device: torch.device, in_features: int, out_features: int) -> str:
    if device.type == "cpu" and int4pack_cpu_available() and out_features % 16 == 0:
        return "int4pack_cpu"
    if (int4pack_cuda_available(device) and in_features % (16 * _INNER_K_TILES_CUDA) == 0
            and out_features % 8 == 0):
        return "int4pack_cuda"
    return "reference"


class Int4Linear(nn.Module):
    """A drop-in for nn.Linear holding group-wise int4 weights.

    ``input_perm`` (optional, [K] long) reorders the input features first; GPTQ act-order
    checkpoints need it so that each quantization group is contiguous along K.
    """

    def __init__(self, weights: Int4Weights, bias: torch.Tensor | None, device: torch.device,
                 path: str | None = None, input_perm: torch.Tensor | None = None,
                 scale_dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        self.out_features, self.in_features = weights.shape
        check_group_size(weights.group_size, self.in_features)
        self.group_size = weights.group_size
        self.path = path or choose_int4_path(device, self.in_features, self.out_features)
        self.kernel_dtype: torch.dtype | None = None     # int4pack_cpu: run in this dtype (None: the input's)
        self.register_buffer("bias", None if bias is None else bias.to(device))
        self.register_buffer("input_perm", None if input_perm is None else input_perm.to(device).long())
        w = Int4Weights(weights.q.to(device), weights.scale.to(device), weights.zero.to(device),
                        weights.group_size)
        if self.path == "int4pack_cpu":
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(w.q.to(torch.int32), 1)
        elif self.path == "int4pack_cuda":
            pairs = (w.q[:, ::2] << 4 | w.q[:, 1::2]).to(torch.uint8)
            packed = torch.ops.aten._convert_weight_to_int4pack(pairs.contiguous(), _INNER_K_TILES_CUDA)
            scale_dtype = torch.bfloat16
        elif self.path == "reference":
            packed = (w.q[:, ::2] << 4 | w.q[:, 1::2]).to(torch.uint8)  # 2 per byte, still 4 bits each
        else:
            raise ValueError(f"unknown int4 path {self.path!r}")
        self.register_buffer("weight_packed", packed)
        self.register_buffer("scales_and_zeros", pack_scales_and_zeros(w, scale_dtype))

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 128, path: str | None = None) -> Int4Linear:
        weights = quantize_int4_groupwise(linear.weight, group_size)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        # Scales/zeros in the model's dtype, so the packed matmul reads them without a cast.
        return cls(weights, bias, linear.weight.device, path=path, scale_dtype=linear.weight.dtype)

    def weight_bytes(self) -> int:
        return (self.weight_packed.numel() * self.weight_packed.element_size()
                + self.scales_and_zeros.numel() * self.scales_and_zeros.element_size())

    def unpacked(self) -> Int4Weights:
        """The int4 values and their scales, whatever the packing (only for the reference path)."""
        if self.path != "reference":
            raise ValueError("unpacked() needs path='reference'; the kernel packings are opaque")
        hi = (self.weight_packed >> 4) & 0xF
        lo = self.weight_packed & 0xF
        q = torch.stack([hi, lo], dim=-1).reshape(self.out_features, self.in_features)
        sz = self.scales_and_zeros.transpose(0, 1).float()
        return Int4Weights(q=q, scale=sz[..., 0], zero=sz[..., 1], group_size=self.group_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_perm is not None:
            x = x.index_select(-1, self.input_perm)
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        if self.path == "int4pack_cpu":
            kd = self.kernel_dtype or x2.dtype
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                x2.to(kd), self.weight_packed, self.group_size, self.scales_and_zeros.to(kd)).to(x.dtype)
        elif self.path == "int4pack_cuda":
            out = torch.ops.aten._weight_int4pack_mm(
                x2.to(torch.bfloat16), self.weight_packed, self.group_size, self.scales_and_zeros)
            out = out.to(x.dtype)
        else:
            w = dequantize_int4(self.unpacked(), x.dtype)
            out = F.linear(x2, w)
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"group_size={self.group_size}, path={self.path}")
