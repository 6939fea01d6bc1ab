"""FP8 (e4m3) and INT4 (group-wise) weights kept packed, widened in registers: the CPU decode path.

A decode step at small batch reads every weight once, so it runs at the speed its bytes allow: 1 byte a
weight for FP8, half a byte plus the group scales for INT4, against 2 for bf16-stored weights. The layers
here keep the weights packed and, for up to ``MAX_KERNEL_ROWS`` rows, multiply with quant_weights.cpp, which
widens each weight in registers and accumulates in fp32; for more rows (prefill, compute-bound) they widen
the whole weight to fp32 (in C++, in parallel) and call torch's matmul.

The kernel has an AVX2 (+FMA+F16C) body and AVX-512 bodies, compiled with target attributes:
quant_weights_avx512.cpp (fp8 via F16C, dequantize), quant_weights_int4_tiles.cpp (int4 decode, several rows
and tokens a pass) and quant_weights_vbmi.cpp (fp8 decode widened by vpermi2b tables, AVX512-VBMI).
For int4, quant_weights_w4a8.cpp quantizes each token's activations to int8 (one scale per weight group) and
multiplies with integer dot products (AVX2 vpmaddubsw, AVX-512 VNNI vpdpbusd): ISA_NAMES avx2_w4a8 and
avx512vnni_w4a8, named apart because their arithmetic is not fp32. For fp8, quant_weights_fp8_int.cpp widens
e4m3 with integer instructions only (ISA names avx2_intwiden and avx512_intwiden), for cores where F16C's
conversion, not the memory, limits the F16C bodies.
``choose_isa`` times every body the CPU can run for the scheme (ISA_NAMES) and keeps the fastest;
``TRIAGE_QUANT_ISA`` narrows the choice to a comma-separated list or forces one (e.g. ``avx2`` to measure the
fp32 AVX2 path on an AVX-512 CPU, ``avx2,avx2_intwiden,avx2_w4a8`` to choose as an AVX2-only CPU would).
``pack_into_arena`` puts a model's packed weights in one buffer in call order, so a decode step reads one stream.
Whether a model uses the kernel at all is measured as well
(``choose_cpu_kernel``, the counterpart of weight_storage=auto): one decode-shaped matmul against the
path the layer would otherwise take; where the kernel cannot be built or is slower, the old path stays and
the reason is recorded (QuantSummary.kernel, and each baseline ``weights-*`` row).
"""
from __future__ import annotations

import functools
import logging
import mmap
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from triage.reference_engine.layers.kernels.bf16_weights import _time_s, build_extension

log = logging.getLogger(__name__)

MAX_KERNEL_ROWS = 32
MIN_GAIN_X = 1.05           # the kernel must beat the fallback by this much to be chosen
ISA_NAMES = ("avx2", "avx512", "avx512vbmi", "avx2_w4a8", "avx512vnni_w4a8", "avx2_intwiden", "avx512_intwiden")
# The extension's sources (quant_weights.h is shared by both; torch rebuilds when a source's text changes).
_SOURCES = [Path(__file__).with_name(n) for n in ("quant_weights.cpp", "quant_weights_avx512.cpp", "quant_weights_vbmi.cpp",
                                                    "quant_weights_int4_tiles.cpp", "quant_weights_w4a8.cpp",
                                                    "quant_weights_fp8_int.cpp")]
# int4 only: the activations quantized to int8 per weight group and integer dot products (quant_weights_w4a8.cpp).
INT8_ACTIVATION_ISAS = frozenset({3, 4})
# fp8 only: e4m3 widened by integer instructions, fp32 arithmetic (quant_weights_fp8_int.cpp).
FP8_ONLY_ISAS = frozenset({5, 6})
W4A8_GROUP_MULTIPLE = 128     # their layout: one 64-byte load of packed weights covers 128 k-values
_PROBE_SHAPE = (2048, 2048)  # (out, in) of the ISA probe


@functools.cache
def kernel() -> tuple[Any, str | None]:
    """(the compiled module, None) or (None, why not)."""
    return build_extension("triage_quant_weights", _SOURCES, {"avx2", "fma", "f16c"},
                           ["-O3", "-mavx2", "-mfma", "-mf16c"], "the fp8/int4 weight kernels (about 40 s)",
                           {"fp8_linear": _fp8_linear_shape, "int4_linear": _int4_linear_shape})


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """uint8 [N, K] in 0..15 -> [N, K/2]: in each block of 32 k-values, byte j = q[j] | q[j + 16] << 4."""
    n, k = q.shape
    if k % 32:
        raise ValueError(f"in_features={k} is not a multiple of 32")
    b = q.to(torch.uint8).reshape(n, k // 32, 2, 16)
    return (b[:, :, 0] | (b[:, :, 1] << 4)).reshape(n, k // 2).contiguous()


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of pack_int4."""
    n, half = packed.shape
    b = packed.reshape(n, half // 16, 16)
    return torch.stack([b & 0xF, b >> 4], dim=2).reshape(n, 2 * half)


def available_isas(module: Any, scheme: str | None = None, group: int = 128) -> list[int]:
    """The bodies this CPU can run for ``scheme``: AVX2 always, AVX-512F/BW/VL, and AVX-512 with VBMI (fp32
    activations, every scheme); for int4 with a group that is a multiple of 128, also the int8-activation bodies:
    AVX2 always, AVX-512 with VNNI; for fp8, also the drivers with integer widening (AVX2, AVX-512)."""
    isas = [0]
    if module.avx512_supported():
        isas.append(1)
        if module.vbmi_supported():
            isas.append(2)
    if scheme == "fp8":
        isas.append(5)
        if module.avx512_supported():
            isas.append(6)
    if scheme == "int4" and group % W4A8_GROUP_MULTIPLE == 0:
        isas.append(3)
        if module.avx512_supported() and module.vnni_supported():
            isas.append(4)
    return isas


def _why_not(module: Any, isa: int, scheme: str | None, group: int) -> str:
    if isa in FP8_ONLY_ISAS and scheme != "fp8":
        return f"{ISA_NAMES[isa]} runs fp8 only"
    if isa in INT8_ACTIVATION_ISAS and scheme != "int4":
        return f"{ISA_NAMES[isa]} runs int4 only"
    if isa in INT8_ACTIVATION_ISAS and group % W4A8_GROUP_MULTIPLE:
        return f"{ISA_NAMES[isa]} needs a group that is a multiple of {W4A8_GROUP_MULTIPLE} (this one: {group})"
    if not module.avx512_supported():
        return "this CPU has no AVX-512"
    return f"this CPU has no {'AVX512-VBMI' if isa == 2 else 'AVX512-VNNI'}"


def _forced(module: Any, isas: list[int], scheme: str | None, group: int) -> list[int] | None:
    """TRIAGE_QUANT_ISA: the bodies it allows that run ``scheme`` here (None: unset). A comma-separated list;
    e.g. ``avx2,avx2_intwiden,avx2_w4a8`` leaves what an AVX2-only CPU would measure."""
    raw = os.environ.get("TRIAGE_QUANT_ISA", "")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        return None
    unknown = [n for n in names if n not in ISA_NAMES]
    if unknown:
        raise RuntimeError(f"TRIAGE_QUANT_ISA={raw}: {', '.join(unknown)} is not a body (the bodies: "
                           f"{', '.join(ISA_NAMES)})")
    wanted = [ISA_NAMES.index(n) for n in names]
    usable = [i for i in wanted if i in isas]
    if not usable:
        raise RuntimeError(f"TRIAGE_QUANT_ISA={raw}, but " + "; ".join(_why_not(module, i, scheme, group)
                                                                        for i in wanted))
    return usable


# How a body's arithmetic differs from widening exactly and multiplying in fp32, where it does.
_ARITHMETIC = {**dict.fromkeys(INT8_ACTIVATION_ISAS, "; int8 activations per group, int32 dot products"),
               **dict.fromkeys(FP8_ONLY_ISAS, "; e4m3 widened by integer instructions, subnormal weights read as 0")}


@functools.cache
def choose_isa(scheme: str | None = None, group: int = 128) -> tuple[int, str]:
    """(index into ISA_NAMES, why): the fastest body this CPU can run for ``scheme`` (fp8, int4 at ``group``;
    None: the two together, fp32 bodies only), by measurement; TRIAGE_QUANT_ISA narrows the choice or forces one."""
    module = kernel()[0]
    if module is None:
        raise RuntimeError(kernel()[1])
    isas = available_isas(module, scheme, group)
    forced = _forced(module, isas, scheme, group)
    if forced is not None and len(forced) == 1:
        return forced[0], f"{ISA_NAMES[forced[0]]} (forced by TRIAGE_QUANT_ISA{_ARITHMETIC.get(forced[0], '')})"
    isas = forced or isas
    if isas == [0]:
        return 0, "avx2 (the CPU has no AVX-512)"
    gen = torch.Generator().manual_seed(0)
    n, k = _PROBE_SHAPE
    x = torch.randn(1, k, generator=gen)
    # e4m3 bytes as a quantized model holds them: both signs, and subnormals only as often as real weights have
    # them (a body whose arithmetic slows on subnormal inputs is timed on the mix it will meet)
    w8, s8 = _quantize_fp8(torch.randn(n, k, generator=gen))
    w4 = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    s4 = torch.rand(n, k // 128, generator=gen)
    calls = {"fp8": lambda i: module.fp8_linear(x, w8, s8, i),
             "int4": lambda i: module.int4_linear(x, w4, s4, s4, 128, i)}
    run = [calls[scheme]] if scheme else list(calls.values())
    times = {i: float("inf") for i in isas}
    for _ in range(5):          # the bodies alternate, each keeping its best: a shared host's load hits all alike
        for i in isas:
            times[i] = min(times[i], _time_s(lambda i=i: [f(i) for f in run], 5))
    isa = min(isas, key=times.__getitem__)
    timing = ", ".join(f"{ISA_NAMES[i]} {times[i] * 1e3:.3f} ms" for i in isas)
    what = f"{scheme} matmul" if scheme else "fp8 + int4 pair"
    among = " among those TRIAGE_QUANT_ISA allows" if forced else ""
    return isa, f"{ISA_NAMES[isa]} (measured{among}, a 1x{k} @ {k}x{n} {what}: {timing}{_ARITHMETIC.get(isa, '')})"


def _quantize_fp8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 bytes [N, K] as uint8, fp32 scale [N]): per-channel, as the quantized models are."""
    from triage.reference_engine.layers.quant.fp8 import quantize_fp8_per_channel

    q, scale = quantize_fp8_per_channel(w)
    return q.view(torch.uint8), scale


# The decode kernels are also torch operators, ``triage::fp8_linear`` and ``triage::int4_linear``, which
# quant_weights.cpp registers as it loads, so that torch.compile keeps each whole in the compiled step (see
# bf16_weights.bf16_weight_linear). Their fake implementations give the output shapes.
def _fp8_linear_shape(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, isa: int) -> torch.Tensor:
    return x.new_empty(x.shape[0], w.shape[0])


def _int4_linear_shape(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, group: int,
                       isa: int) -> torch.Tensor:
    return x.new_empty(x.shape[0], scale.shape[0])       # w is [N, K/2] packed; the scales are [N, groups]


def fp8_linear(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, isa: int) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return torch.ops.triage.fp8_linear(x, w, scale, isa)
    return kernel()[0].fp8_linear(x, w, scale, isa)


def int4_linear(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor, group: int,
                isa: int) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return torch.ops.triage.int4_linear(x, w, scale, offset, group, isa)
    return kernel()[0].int4_linear(x, w, scale, offset, group, isa)


def _rows(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    rows = x.reshape(-1, layer.in_features)
    return rows if rows.dtype == torch.float32 else rows.float()


def _finish(layer: nn.Module, out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    if layer.bias is not None:
        out = out + layer.bias
    if out.dtype != x.dtype:
        out = out.to(x.dtype)
    return out.view(*x.shape[:-1], layer.out_features)


class Fp8KernelLinear(nn.Module):
    """nn.Linear's job with e4m3 weights (uint8 storage) and one fp32 scale per output channel (a per-tensor
    scale is broadcast to every channel), on the CPU kernel."""

    path = "cpu_fp8_kernel"

    def __init__(self, weight_fp8: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, isa: int) -> None:
        super().__init__()
        self.out_features, self.in_features = weight_fp8.shape
        self.isa = isa
        self.register_buffer("weight_u8", weight_fp8.contiguous().view(torch.uint8))
        self.register_buffer("weight_scale", scale.float().reshape(-1).expand(self.out_features).contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear, isa: int, per_tensor: bool = False) -> Fp8KernelLinear:
        from triage.reference_engine.layers.quant.fp8 import FP8_DTYPE, FP8_MAX

        w = linear.weight.detach().float()
        if per_tensor:
            scale = (w.abs().amax() / FP8_MAX).clamp(min=1e-12).reshape(1)
            q = (w / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
        else:
            q, scale = _quantize_fp8(w)
        return cls(q, scale, linear.bias, isa)

    def weight_bytes(self) -> int:
        return self.weight_u8.numel() + self.weight_scale.numel() * 4

    def dequantized(self) -> torch.Tensor:
        return self.weight_u8.view(torch.float8_e4m3fn).float() * self.weight_scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = _rows(self, x)
        if rows.shape[0] <= MAX_KERNEL_ROWS:
            out = fp8_linear(rows, self.weight_u8, self.weight_scale, self.isa)
        else:                     # prefill: widen the whole weight (in C++, in parallel), then torch's matmul
            out = F.linear(rows, kernel()[0].fp8_dequant(self.weight_u8, self.weight_scale, self.isa))
        return _finish(self, out, x)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, isa={ISA_NAMES[self.isa]}"


class Int4KernelLinear(nn.Module):
    """nn.Linear's job with group-wise int4 weights (two a byte, pack_int4's layout) and fp32 group scales:
    w = (q - 8) * scale (symmetric) or (q - 8) * scale + zero (asymmetric), on the CPU kernel."""

    path = "cpu_int4_kernel"

    def __init__(self, weights, bias: torch.Tensor | None, isa: int, symmetric: bool = False) -> None:
        super().__init__()
        self.out_features, self.in_features = weights.shape
        self.group_size, self.isa, self.symmetric = weights.group_size, isa, symmetric
        if weights.group_size % 32:
            raise ValueError(f"the int4 kernel needs a group size that is a multiple of 32, got {weights.group_size}")
        if isa in INT8_ACTIVATION_ISAS and weights.group_size % W4A8_GROUP_MULTIPLE:
            raise ValueError(f"{ISA_NAMES[isa]} needs a group size that is a multiple of {W4A8_GROUP_MULTIPLE}, "
                             f"got {weights.group_size}")
        scale = weights.scale.float().contiguous()
        if symmetric and bool((weights.zero != 0).any()):
            raise ValueError("symmetric int4 weights must have zero == 0")
        self.register_buffer("weight_packed", pack_int4(weights.q))
        self.register_buffer("weight_scale", scale)
        # Asymmetric: the offset a q of 0 decodes to (zero - 8 * scale); symmetric: none (the kernel uses -8 * scale).
        self.register_buffer("weight_offset", torch.empty(0) if symmetric
                             else (weights.zero.float() - 8.0 * scale).contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear, isa: int, group_size: int = 128, symmetric: bool = False):
        from triage.reference_engine.layers.quant.int4 import quantize_int4_groupwise

        return cls(quantize_int4_groupwise(linear.weight, group_size, symmetric=symmetric), linear.bias, isa,
                   symmetric)

    def weight_bytes(self) -> int:
        return self.weight_packed.numel() + (self.weight_scale.numel() + self.weight_offset.numel()) * 4

    def dequantized(self) -> torch.Tensor:
        q = unpack_int4(self.weight_packed).float().reshape(self.out_features, -1, self.group_size)
        off = -8.0 * self.weight_scale if self.symmetric else self.weight_offset
        return (q * self.weight_scale.unsqueeze(-1) + off.unsqueeze(-1)).reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = _rows(self, x)
        args = (self.weight_packed, self.weight_scale, self.weight_offset, self.group_size, self.isa)
        out = int4_linear(rows, *args) if rows.shape[0] <= MAX_KERNEL_ROWS else \
            F.linear(rows, kernel()[0].int4_dequant(*args))
        return _finish(self, out, x)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}, "
                f"{'symmetric' if self.symmetric else 'asymmetric'}, isa={ISA_NAMES[self.isa]}")


ARENA_ALIGN_BYTES = 64
HUGE_PAGE_BYTES = 2 << 20
ARENA_HUGE_PAGES = True     # benchmarks turn it off to measure what the huge pages give


def _arena(num_bytes: int) -> torch.Tensor:
    """A zeroed uint8 buffer for pack_into_arena. On Linux, an anonymous mapping advised for transparent huge
    pages before anything touches it (advised after, the pages are already 4 KiB ones): a decode step streams the
    whole arena, so it then walks one page table entry per 2 MiB instead of per 4 KiB. Where that is not possible
    (another OS, THP off, a small arena) the memory is ordinary."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    if not ARENA_HUGE_PAGES or advice is None or num_bytes < HUGE_PAGE_BYTES:
        return torch.zeros(num_bytes, dtype=torch.uint8)
    mapping = mmap.mmap(-1, num_bytes + HUGE_PAGE_BYTES, flags=flags)
    try:
        mapping.madvise(advice)
    except OSError as exc:      # THP compiled out: the mapping still works, in 4 KiB pages
        log.debug("huge pages not advised for the weight arena: %s", exc)
    whole = torch.frombuffer(mapping, dtype=torch.uint8)       # the tensor keeps the mapping alive
    start = (-whole.data_ptr()) % HUGE_PAGE_BYTES
    return whole[start:start + num_bytes]


def pack_into_arena(layers: list[nn.Module]) -> int:
    """Moves the packed weights, scales and offsets of ``layers`` (kernel layers, in the order a forward pass
    calls them) into one contiguous uint8 tensor, each buffer becoming a view of it; returns its bytes.

    A decode step then reads one stream from start to end: the hardware prefetcher and the kernels' software
    prefetch run on from one layer into the next instead of starting cold at every separately allocated tensor
    (measured on the `small` preset's layers, a plain read of separate tensors ran at ~65% of the same bytes
    read as one buffer). The buffer is in huge pages where the OS gives them (_arena)."""
    names = ("weight_u8", "weight_packed", "weight_scale", "weight_offset")
    parts = [(layer, n, layer._buffers[n]) for layer in layers for n in names
             if isinstance(layer._buffers.get(n), torch.Tensor) and layer._buffers[n].numel()]
    offsets, total = [], 0
    for _, _, t in parts:
        offsets.append(total)
        total += -(-t.numel() * t.element_size() // ARENA_ALIGN_BYTES) * ARENA_ALIGN_BYTES
    arena = _arena(total)
    for (layer, name, t), off in zip(parts, offsets, strict=True):
        view = arena[off:off + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
        view.copy_(t)
        layer._buffers[name] = view
    return total


@dataclass(frozen=True, slots=True)
class KernelChoice:
    """What a quantized model's layers run, and why: the fields every baseline weights-* row names."""

    use: bool
    kernel: str                 # the layer path that runs: cpu_fp8_kernel, int4pack_cpu, dequant, ...
    isa: str | None             # avx2 / avx512 for the kernel; None for torch's own paths
    fell_back: bool             # the kernel was wanted (auto / on) and something else runs
    reason: str

    @property
    def activations(self) -> str | None:
        """What the kernel multiplies the packed weights with (None: torch's path, in its own dtype)."""
        if not self.use or self.isa is None:
            return None
        int8 = self.isa in {ISA_NAMES[i] for i in INT8_ACTIVATION_ISAS}
        return "int8 per weight group" if int8 else "fp32"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "activations": self.activations}


def choose_cpu_kernel(scheme: str, in_features: int, out_features: int, make_fallback: Callable[[nn.Linear], nn.Module],
                      mode: str = "auto", group_size: int = 128) -> KernelChoice:
    """Whether ``scheme`` (fp8 / int4) layers of a CPU model use the kernel. ``make_fallback`` builds the layer
    used otherwise. mode auto times one decode-shaped matmul each way on random weights of the given shape; on
    forces the kernel; off keeps the fallback."""
    gen = torch.Generator().manual_seed(0)
    dense = nn.Linear(in_features, out_features, bias=False)
    with torch.no_grad():
        dense.weight.copy_(torch.randn(out_features, in_features, generator=gen) * 0.02)
    fallback = make_fallback(dense)
    other = str(getattr(fallback, "path", "torch"))
    if mode == "off":
        return KernelChoice(False, other, None, False, "the CPU kernel is off (cpu_kernel=off)")
    module, why = kernel()
    if module is None:
        if mode == "on":
            raise RuntimeError(f"cpu_kernel=on: {why}")
        return KernelChoice(False, other, None, True, f"fell back to {other}: {why}")
    isa, isa_why = choose_isa(scheme, group_size if scheme == "int4" else 128)
    name = "cpu_fp8_kernel" if scheme == "fp8" else "cpu_int4_kernel"
    if mode == "on":
        return KernelChoice(True, name, ISA_NAMES[isa], False, f"forced (cpu_kernel=on); ISA {isa_why}")
    layer = (Fp8KernelLinear.from_linear(dense, isa) if scheme == "fp8"
             else Int4KernelLinear.from_linear(dense, isa, group_size))
    x = torch.randn(1, in_features, generator=gen)
    with torch.inference_mode():
        t_kernel, t_other = _time_s(lambda: layer(x)), _time_s(lambda: fallback(x))
    timing = (f"a 1x{in_features} @ {in_features}x{out_features} decode matmul: {t_kernel * 1e3:.3f} ms on the "
              f"kernel, {t_other * 1e3:.3f} ms on {other}")
    if t_other / t_kernel < MIN_GAIN_X:
        return KernelChoice(False, other, None, True,
                            f"fell back to {other}: the kernel is not faster ({timing}); ISA {isa_why}")
    return KernelChoice(True, name, ISA_NAMES[isa], False, f"{timing}, {t_other / t_kernel:.2f}x; ISA {isa_why}")
