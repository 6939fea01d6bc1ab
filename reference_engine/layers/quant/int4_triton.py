"""INT4 weight-only matmul on a GPU with a Triton kernel: the weights stay packed (kernels/quant_weights.py's
layout, two a byte) and are widened tile by tile in registers; fp32 group scale and offset per (row, group).

y[m, n] = sum_k x[m, k] * (q[n, k] * scale[n, g] + offset[n, g]), offset = zero - 8 * scale (asymmetric) or
-8 * scale (symmetric, no offset tensor). Each program owns a BLOCK_M x BLOCK_N tile of y and walks K 32 at a
time: one 16-byte run of each weight row holds k0..k0+15 in its low nibbles and k0+16..k0+31 in its high ones.

Used for CUDA layers whose shape torch's tinygemm int4 kernel does not take (it needs K % 128 and N % 8), or
when asked for (path="triton"); runs on CPU tensors under TRITON_INTERPRET=1 for tests. Importing this module
needs triton; quant/handlers.py imports it only when a CUDA model is converted.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from triage.reference_engine.layers.kernels.quant_weights import pack_int4


@triton.jit
def _int4_matmul_kernel(x_ptr, w_ptr, s_ptr, o_ptr, y_ptr, M, N, K, G, stride_xm, stride_ym,
                        GROUP: tl.constexpr, SYMMETRIC: tl.constexpr, PRECISION: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    j = tl.arange(0, 16)
    m_ok = rm < M
    n_ok = rn < N
    half = K // 2
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, 32):
        b = tl.load(w_ptr + rn[:, None] * half + k0 // 2 + j[None, :], mask=n_ok[:, None], other=0)
        g = k0 // GROUP
        s = tl.load(s_ptr + rn * G + g, mask=n_ok, other=0.0)
        if SYMMETRIC:
            o = -8.0 * s
        else:
            o = tl.load(o_ptr + rn * G + g, mask=n_ok, other=0.0)
        w_lo = (b & 0xF).to(tl.float32) * s[:, None] + o[:, None]        # [BLOCK_N, 16]: k0 .. k0+15
        w_hi = (b >> 4).to(tl.float32) * s[:, None] + o[:, None]         # k0+16 .. k0+31
        x_lo = tl.load(x_ptr + rm[:, None] * stride_xm + k0 + j[None, :], mask=m_ok[:, None], other=0.0)
        x_hi = tl.load(x_ptr + rm[:, None] * stride_xm + k0 + 16 + j[None, :], mask=m_ok[:, None], other=0.0)
        acc += tl.dot(x_lo, tl.trans(w_lo.to(x_lo.dtype)), input_precision=PRECISION)
        acc += tl.dot(x_hi, tl.trans(w_hi.to(x_hi.dtype)), input_precision=PRECISION)
    y = y_ptr + rm[:, None] * stride_ym + rn[None, :]
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def int4_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None,
                group: int, block_n: int = 64) -> torch.Tensor:
    """x [M, K] (fp32, bf16 or fp16) @ the packed int4 weight [N, K/2]^T -> [M, N] in x's dtype."""
    m, k = x.shape
    n = packed.shape[0]
    if packed.shape[1] * 2 != k or k % group or group % 32:
        raise ValueError(f"shapes: x {tuple(x.shape)}, packed {tuple(packed.shape)}, group {group}")
    x = x.contiguous()
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    symmetric = offset is None or offset.numel() == 0
    block_m = 16 if m <= 16 else 32
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _int4_matmul_kernel[grid](x, packed, scale, scale if symmetric else offset, y, m, n, k, k // group,
                              x.stride(0), y.stride(0), GROUP=group, SYMMETRIC=symmetric,
                              PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
                              BLOCK_M=block_m, BLOCK_N=block_n)
    return y


class Int4TritonLinear(nn.Module):
    """nn.Linear's job on a GPU with group-wise int4 weights, through the Triton kernel above."""

    path = "triton_int4"

    def __init__(self, weights, bias: torch.Tensor | None, device: torch.device, symmetric: bool = False) -> None:
        super().__init__()
        self.out_features, self.in_features = weights.shape
        self.group_size, self.symmetric = weights.group_size, symmetric
        scale = weights.scale.float()
        self.register_buffer("weight_packed", pack_int4(weights.q).to(device))
        self.register_buffer("weight_scale", scale.contiguous().to(device))
        self.register_buffer("weight_offset", torch.empty(0, device=device) if symmetric
                             else (weights.zero.float() - 8.0 * scale).contiguous().to(device))
        self.register_buffer("bias", None if bias is None else bias.detach().to(device))

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 128, symmetric: bool = False) -> Int4TritonLinear:
        from triage.reference_engine.layers.quant.int4 import quantize_int4_groupwise

        return cls(quantize_int4_groupwise(linear.weight, group_size, symmetric=symmetric), linear.bias,
                   linear.weight.device, symmetric)

    def weight_bytes(self) -> int:
        return self.weight_packed.numel() + (self.weight_scale.numel() + self.weight_offset.numel()) * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        out = int4_matmul(rows, self.weight_packed, self.weight_scale, self.weight_offset, self.group_size)
        if self.bias is not None:
            out = out + self.bias.to(out.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}, "
                f"{'symmetric' if self.symmetric else 'asymmetric'}")
