"""Import AWQ- and GPTQ-packed 4-bit checkpoints from a local directory into Int4Weights.

Both formats pack eight 4-bit values into each int32, lowest bits first, and keep fp16 scales
[G, N] with integer zero points. They differ in which axis is packed and in the zero convention:

GPTQ (AutoGPTQ "gptq" format, v1):
    qweight int32 [K/8, N]  packed along K;   qzeros int32 [G, N/8] packed along N, stored as z - 1
    w[n, k] = scales[g(k), n] * (q[k, n] - (z_stored[g(k), n] + 1)),  g(k) = g_idx[k]
    ("gptq_v2" stores z itself; act-order checkpoints carry a non-monotonic g_idx.)
AWQ (AutoAWQ "gemm" version):
    qweight int32 [K, N/8]  packed along N;   qzeros int32 [G, N/8] packed along N, z itself
    nibble i of each int32 holds column 8c + AWQ_PACK_ORDER[i]
    w[n, k] = scales[k // g, n] * (q[k, n] - z[k // g, n])

Ours (int4.py): w = (q - 8) * scale + zero_f, so the integer zero point z becomes
zero_f = (8 - z) * scale.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from triage.core.errors import EngineError
from triage.reference_engine.layers.quant.int4 import SUPPORTED_GROUP_SIZES, Int4Weights

AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
_SHIFTS = torch.arange(0, 32, 4, dtype=torch.int32)  # nibble i lives at bits 4i..4i+3


class QuantCheckpointError(EngineError):
    """A quantized checkpoint that cannot be imported (format, bits, group size, missing tensors)."""


# --- bit packing -------------------------------------------------------------------------------

def _unpack_int32(packed: torch.Tensor, dim: int) -> torch.Tensor:
    """int32 tensor -> int tensor with ``dim`` 8x longer; nibble i of each word comes i-th."""
    nibbles = (packed.to(torch.int32).unsqueeze(-1) >> _SHIFTS) & 0xF  # [..., 8]
    if dim == 0:
        # [R, C, 8] -> [R, 8, C] -> [R*8, C]
        return nibbles.permute(0, 2, 1).reshape(packed.shape[0] * 8, packed.shape[1])
    return nibbles.reshape(packed.shape[0], packed.shape[1] * 8)


def _awq_unorder(cols: torch.Tensor) -> torch.Tensor:
    """Undo AWQ's interleave along the last dim (which is N, in blocks of 8)."""
    rows, n = cols.shape
    blocks = cols.reshape(rows, n // 8, 8)
    out = torch.empty_like(blocks)
    out[..., list(AWQ_PACK_ORDER)] = blocks
    return out.reshape(rows, n)


# --- conversion --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ImportedLinear:
    weights: Int4Weights
    input_perm: torch.Tensor | None  # set for GPTQ act-order checkpoints


def _to_ours(q_kn: torch.Tensor, zeros_gn: torch.Tensor, scales_gn: torch.Tensor, group_size: int) -> Int4Weights:
    scale = scales_gn.float().t().contiguous()                  # [N, G]
    zero = ((8.0 - zeros_gn.float()) * scales_gn.float()).t().contiguous()
    return Int4Weights(q=q_kn.t().contiguous().to(torch.uint8), scale=scale, zero=zero, group_size=group_size)


def convert_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group_size: int,
                 g_idx: torch.Tensor | None = None, v2: bool = False) -> ImportedLinear:
    q = _unpack_int32(qweight, dim=0)                 # [K, N]
    k, n = q.shape
    zeros = _unpack_int32(qzeros, dim=1)[:, :n]       # [G, N]
    if not v2:
        zeros = (zeros + 1) & 0xF
    if scales.shape != zeros.shape:
        raise QuantCheckpointError(f"GPTQ scales {tuple(scales.shape)} and qzeros {tuple(zeros.shape)} disagree")
    perm = None
    if g_idx is not None:
        g_idx = g_idx.long()
        if not torch.equal(g_idx, torch.arange(k) // group_size):
            # Act-order: reorder K so each group is contiguous, and feed the layer x[..., perm].
            perm = torch.argsort(g_idx, stable=True)
            counts = torch.bincount(g_idx, minlength=scales.shape[0])
            if not bool((counts == group_size).all()):
                raise QuantCheckpointError("GPTQ g_idx does not put exactly group_size inputs in each group")
            q = q[perm]
    return ImportedLinear(_to_ours(q, zeros, scales, group_size), perm)


def convert_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group_size: int) -> ImportedLinear:
    q = _awq_unorder(_unpack_int32(qweight, dim=1))          # [K, N]
    zeros = _awq_unorder(_unpack_int32(qzeros, dim=1))        # [G, N]
    if scales.shape != zeros.shape or q.shape[0] != zeros.shape[0] * group_size:
        raise QuantCheckpointError(
            f"AWQ shapes disagree: qweight→{tuple(q.shape)}, qzeros→{tuple(zeros.shape)}, "
            f"scales {tuple(scales.shape)}, group_size {group_size}")
    return ImportedLinear(_to_ours(q, zeros, scales, group_size), None)


# --- checkpoint directory ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class QuantConfig:
    method: str          # "gptq" | "awq"
    group_size: int
    v2: bool = False     # GPTQ checkpoint_format "gptq_v2"


@dataclass(slots=True)
class ImportedCheckpoint:
    config: QuantConfig
    linears: dict[str, ImportedLinear] = field(default_factory=dict)   # module prefix -> weights
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)     # everything not quantized


def read_quant_config(path: Path) -> QuantConfig:
    raw: dict | None = None
    for name in ("quantize_config.json", "quant_config.json"):
        if (path / name).is_file():
            raw = json.loads((path / name).read_text())
            break
    if raw is None and (path / "config.json").is_file():
        raw = json.loads((path / "config.json").read_text()).get("quantization_config")
    if not raw:
        raise QuantCheckpointError(
            f"{path} has no quantization config (quantize_config.json, or quantization_config in config.json)")
    method = str(raw.get("quant_method", "gptq")).lower()
    bits = int(raw.get("bits", raw.get("w_bit", 4)))
    group_size = int(raw.get("group_size", raw.get("q_group_size", 128)))
    if method not in ("gptq", "awq"):
        raise QuantCheckpointError(f"quant_method {method!r} is not supported; use a GPTQ or AWQ checkpoint")
    if bits != 4:
        raise QuantCheckpointError(f"only 4-bit checkpoints are supported, this one has bits={bits}")
    if group_size not in SUPPORTED_GROUP_SIZES:
        raise QuantCheckpointError(f"group_size {group_size} is not supported; need one of {SUPPORTED_GROUP_SIZES}")
    version = str(raw.get("version", "gemm")).lower()
    if method == "awq" and version != "gemm":
        raise QuantCheckpointError(f"AWQ version {version!r} is not supported; only the 'gemm' packing is")
    v2 = str(raw.get("checkpoint_format", "gptq")).lower() == "gptq_v2"
    return QuantConfig(method=method, group_size=group_size, v2=v2)


def load_quantized_checkpoint(path: str | Path) -> ImportedCheckpoint:
    """Read every *.safetensors file under ``path`` and convert each packed linear layer."""
    from safetensors.torch import load_file

    root = Path(path)
    if not root.is_dir():
        raise QuantCheckpointError(f"{root} is not a directory; pass a local GPTQ/AWQ checkpoint directory")
    cfg = read_quant_config(root)
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise QuantCheckpointError(f"no *.safetensors files in {root}")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    out = ImportedCheckpoint(config=cfg)
    prefixes = sorted(k[: -len(".qweight")] for k in state if k.endswith(".qweight"))
    if not prefixes:
        raise QuantCheckpointError(f"{root} has no '*.qweight' tensors; is it really a {cfg.method} checkpoint?")
    used: set[str] = set()
    for p in prefixes:
        try:
            qweight, qzeros, scales = state[f"{p}.qweight"], state[f"{p}.qzeros"], state[f"{p}.scales"]
        except KeyError as e:
            raise QuantCheckpointError(f"layer {p} is missing tensor {e.args[0]}") from None
        used.update({f"{p}.qweight", f"{p}.qzeros", f"{p}.scales", f"{p}.g_idx"})
        if cfg.method == "gptq":
            out.linears[p] = convert_gptq(qweight, qzeros, scales, cfg.group_size,
                                          g_idx=state.get(f"{p}.g_idx"), v2=cfg.v2)
        else:
            out.linears[p] = convert_awq(qweight, qzeros, scales, cfg.group_size)
    out.tensors = {k: v for k, v in state.items() if k not in used}
    return out
