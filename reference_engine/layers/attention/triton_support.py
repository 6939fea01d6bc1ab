"""Whether the Triton kernels can run here, and why not. Importing this module never needs triton."""
from __future__ import annotations

import importlib.util
import os

import torch


def interpreting() -> bool:
    """TRITON_INTERPRET=1 runs kernels in Triton's numpy interpreter, on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def triton_unavailable_reason(device: str | torch.device = "cuda") -> str | None:
    """None when the Triton kernels can run on ``device``; otherwise the reason in words."""
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install triton; it ships with CUDA builds of torch)"
    dev = torch.device(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA device: the Triton kernels need an NVIDIA GPU (or TRITON_INTERPRET=1 on CPU)"
        return None
    if dev.type == "cpu" and interpreting():
        return None
    return f"Triton kernels run on CUDA devices, not {dev.type} (set TRITON_INTERPRET=1 to interpret on CPU)"


def check_device(t: torch.Tensor) -> None:
    reason = triton_unavailable_reason(t.device)
    if reason is not None:
        raise RuntimeError(reason)
