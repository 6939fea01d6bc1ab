"""FP8 (e4m3) weight-only quantization with one fp32 scale per output channel.

Two execution paths, picked once when the layer is built:
- ``scaled_mm``: on CUDA devices of compute capability 8.9+ (Ada, Hopper, Blackwell), activations are
  quantized per row on the fly and ``torch._scaled_mm`` multiplies with row-wise scales.
- ``dequant``: everywhere else the weight is dequantized to the activation dtype and ``F.linear`` runs.
  Weights stay 1 byte each in memory; the matmul itself is not faster. On a CPU, quantize_model uses
  kernels/quant_weights.py's Fp8KernelLinear instead where it measures faster.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)  # 448.0
_MIN_SCALE = 1e-12


def quantize_fp8_per_channel(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, K] float weight -> (e4m3 [N, K], fp32 scale [N]) with weight ≈ q * scale[:, None]."""
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D weight [out, in], got shape {tuple(weight.shape)}")
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / FP8_MAX).clamp(min=_MIN_SCALE)
    q = (w / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q, scale


def dequantize_fp8(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Inverse of quantize_fp8_per_channel, in ``dtype``."""
    return (q.to(torch.float32) * scale[:, None]).to(dtype)


def quantize_fp8_per_row(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic activation quantization: [M, K] -> (e4m3 [M, K], fp32 scale [M, 1])."""
    xf = x.float()
    scale = (xf.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=_MIN_SCALE)
    return (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


def scaled_mm_supported(device: torch.device) -> bool:
    """True where row-wise-scaled ``torch._scaled_mm`` is available: CUDA with FP8 tensor cores, compute
    capability ≥ 8.9 (Ada, Hopper, Blackwell)."""
    if device.type != "cuda" or not torch.cuda.is_available() or not hasattr(torch, "_scaled_mm"):
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


class Fp8Linear(nn.Module):
    """A drop-in for nn.Linear holding e4m3 weights and per-output-channel fp32 scales."""

    def __init__(self, weight_fp8: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None,
                 use_scaled_mm: bool) -> None:
        super().__init__()
        self.out_features, self.in_features = weight_fp8.shape
        self.register_buffer("weight_fp8", weight_fp8)
        self.register_buffer("weight_scale", weight_scale.float())
        self.register_buffer("bias", bias)
        # _scaled_mm needs both dims to be multiples of 16.
        self.use_scaled_mm = bool(use_scaled_mm and self.in_features % 16 == 0 and self.out_features % 16 == 0)
        self.path = "scaled_mm" if self.use_scaled_mm else "dequant"

    @classmethod
    def from_linear(cls, linear: nn.Linear, allow_scaled_mm: bool = True) -> Fp8Linear:
        q, scale = quantize_fp8_per_channel(linear.weight)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        use = allow_scaled_mm and scaled_mm_supported(linear.weight.device)
        return cls(q, scale, bias, use_scaled_mm=use)

    def weight_bytes(self) -> int:
        return self.weight_fp8.numel() * self.weight_fp8.element_size() + self.weight_scale.numel() * 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_scaled_mm:
            try:
                return self._forward_scaled_mm(x)
            except RuntimeError as e:      # a torch/GPU pair without row-wise scaling (some 8.9 builds)
                self.use_scaled_mm = False
                self.path = f"dequant (torch._scaled_mm failed: {str(e).splitlines()[0][:100]})"
        w = dequantize_fp8(self.weight_fp8, self.weight_scale, x.dtype)
        return F.linear(x, w, None if self.bias is None else self.bias.to(x.dtype))

    def _forward_scaled_mm(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        xq, x_scale = quantize_fp8_per_row(x2)
        out_dtype = x.dtype if x.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
        out = torch._scaled_mm(xq, self.weight_fp8.t(), scale_a=x_scale,
                               scale_b=self.weight_scale.view(1, -1), out_dtype=out_dtype)
        if self.bias is not None:
            out = out + self.bias.to(out_dtype)
        return out.to(x.dtype).reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, path={self.path}"
