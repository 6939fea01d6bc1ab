"""Handlers that convert a loaded model's nn.Linear layers in place (gpt-fast's pattern):
the model code never knows about quantization."""
from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from triage.reference_engine.layers.kernels.quant_weights import (
    ISA_NAMES,
    Fp8KernelLinear,
    Int4KernelLinear,
    KernelChoice,
    choose_cpu_kernel,
    pack_into_arena,
)
from triage.reference_engine.layers.quant.awq_gptq import ImportedCheckpoint, QuantCheckpointError
from triage.reference_engine.layers.quant.fp8 import Fp8Linear
from triage.reference_engine.layers.quant.int4 import Int4Linear, choose_int4_path

SkipFn = Callable[[str, nn.Linear], bool]
CPU_KERNEL_MODES = ("auto", "on", "off")


class QuantScheme(str, enum.Enum):
    NONE = "none"
    FP8 = "fp8"
    INT4 = "int4"


@dataclass(frozen=True, slots=True)
class QuantSummary:
    scheme: QuantScheme
    num_layers_converted: int
    num_layers_skipped: int
    weight_bytes_before: int
    weight_bytes_after: int
    paths: dict[str, int]          # execution path -> number of layers using it
    group_size: int | None = None
    # The converted layers alone: their dense weight bytes before, quantized bytes (scales included) after.
    linear_bytes_before: int = 0
    linear_bytes_after: int = 0
    # What the converted layers run and why (kernels/quant_weights.py KernelChoice.as_dict()), and the bytes a
    # decode step reads per quantized weight, scales included.
    kernel: dict | None = None
    bytes_per_weight: float | None = None

    @property
    def linear_compression_frac(self) -> float | None:
        return None if not self.linear_bytes_after else self.linear_bytes_before / self.linear_bytes_after

    @property
    def compression_frac(self) -> float | None:
        return None if not self.weight_bytes_after else self.weight_bytes_before / self.weight_bytes_after


def model_weight_bytes(model: nn.Module) -> int:
    """Bytes of every parameter and buffer, counting shared (tied) storage once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in [*model.parameters(), *model.buffers()]:
        if t is None or t.device.type == "meta":
            continue
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        if key in seen:
            continue
        seen.add(key)
        total += t.untyped_storage().nbytes()
    return total


def _set_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, module)


def _linears(model: nn.Module) -> list[tuple[str, nn.Linear]]:
    from triage.reference_engine.layers.kernels.bf16_weights import Bf16StoredLinear

    for n, m in list(model.named_modules()):
        if isinstance(m, Bf16StoredLinear):      # bf16-stored fp32 layers quantize from their exact fp32 values
            linear = m.to_linear()
            linear.stored_bytes = m.weight.numel() * m.weight.element_size()     # what a step read before
            _set_module(model, n, linear)
    return [(n, m) for n, m in model.named_modules() if type(m) is nn.Linear]


class _Handler:
    scheme: QuantScheme

    def __init__(self, skip: SkipFn | None = None, cpu_kernel: str = "auto") -> None:
        if cpu_kernel not in CPU_KERNEL_MODES:
            raise ValueError(f"cpu_kernel must be one of {CPU_KERNEL_MODES}, got {cpu_kernel!r}")
        self.skip = skip
        self.cpu_kernel = cpu_kernel
        self.choice: KernelChoice | None = None

    def _fits(self, linear: nn.Linear) -> bool:
        return True

    def _make(self, linear: nn.Linear) -> nn.Module | None:
        raise RuntimeError("subclasses build the quantized layer")

    def _make_kernel(self, linear: nn.Linear, isa: int) -> nn.Module:
        raise RuntimeError("subclasses build the kernel layer")

    def _choose(self, pending: list[nn.Linear]) -> None:
        """CPU layers: the kernel or the torch path, measured once on a typical (median-size) layer shape."""
        if not pending or pending[0].weight.device.type != "cpu":
            return
        probe = sorted(pending, key=lambda m: m.weight.numel())[len(pending) // 2]
        self.choice = choose_cpu_kernel(self.scheme.value, probe.in_features, probe.out_features, self._make,
                                        self.cpu_kernel, getattr(self, "group_size", 128))

    @torch.no_grad()
    def convert(self, model: nn.Module) -> QuantSummary:
        before = model_weight_bytes(model)
        paths: Counter[str] = Counter()
        converted = skipped = lin_before = lin_after = num_weights = 0
        pending = [(n, m) for n, m in _linears(model)
                if not (self.skip is not None and self.skip(n, m)) and self._fits(m)]
        self._choose([m for _, m in pending])
        use_kernel = self.choice is not None and self.choice.use
        isa = ISA_NAMES.index(self.choice.isa) if use_kernel else 0
        chosen = {n for n, _ in pending}
        kernel_layers: list[nn.Module] = []
        for name, linear in _linears(model):
            if name not in chosen:
                skipped += 1
                continue
            new = self._make_kernel(linear, isa) if use_kernel else self._make(linear)
            lin_before += getattr(linear, "stored_bytes", linear.weight.numel() * linear.weight.element_size())
            lin_after += new.weight_bytes()
            num_weights += linear.weight.numel()
            _set_module(model, name, new)
            paths[getattr(new, "path", "unknown")] += 1
            converted += 1
            if use_kernel:
                kernel_layers.append(new)
        if kernel_layers:           # one contiguous stream, in call order (named_modules order)
            pack_into_arena(kernel_layers)
        return QuantSummary(self.scheme, converted, skipped, before, model_weight_bytes(model), dict(paths),
                            getattr(self, "group_size", None), lin_before, lin_after,
                            None if self.choice is None else self.choice.as_dict(),
                            lin_after / num_weights if num_weights else None)


class Fp8WeightOnlyHandler(_Handler):
    """Every nn.Linear -> Fp8Linear (e4m3 weights, per-output-channel scales)."""

    scheme = QuantScheme.FP8

    def __init__(self, skip: SkipFn | None = None, allow_scaled_mm: bool = True, cpu_kernel: str = "auto",
                 per_tensor: bool = False) -> None:
        super().__init__(skip, cpu_kernel)
        self.allow_scaled_mm = allow_scaled_mm
        self.per_tensor = per_tensor      # the CPU kernel only (torch's paths keep per-channel scales)

    def _make(self, linear: nn.Linear) -> nn.Module:
        return Fp8Linear.from_linear(linear, allow_scaled_mm=self.allow_scaled_mm)

    def _make_kernel(self, linear: nn.Linear, isa: int) -> nn.Module:
        return Fp8KernelLinear.from_linear(linear, isa, per_tensor=self.per_tensor)


class Int4WeightOnlyHandler(_Handler):
    """Every nn.Linear whose in_features fits the group size -> Int4Linear; others stay dense."""

    scheme = QuantScheme.INT4

    def __init__(self, group_size: int = 128, skip: SkipFn | None = None, path: str | None = None,
                 cpu_kernel: str = "auto", symmetric: bool = False) -> None:
        super().__init__(skip, "off" if path is not None else cpu_kernel)     # a named path is what runs
        self.group_size = group_size
        self.path = path
        self.symmetric = symmetric        # the CPU kernel only (torch's packings are asymmetric)
        self.kernel_dtype: torch.dtype | None = None

    def _fits(self, linear: nn.Linear) -> bool:
        return linear.in_features % self.group_size == 0

    def _make(self, linear: nn.Linear) -> nn.Module:
        if linear.weight.device.type == "cuda" and self._triton(linear):
            from triage.reference_engine.layers.quant.int4_triton import Int4TritonLinear

            return Int4TritonLinear.from_linear(linear, self.group_size, symmetric=self.symmetric)
        layer = Int4Linear.from_linear(linear, self.group_size, path=self.path)
        layer.kernel_dtype = self.kernel_dtype
        return layer

    def _triton(self, linear: nn.Linear) -> bool:
        """The Triton kernel: when asked for, or where tinygemm's CUDA kernel does not take the shape."""
        from triage.reference_engine.layers.attention.triton_support import triton_unavailable_reason

        if self.path == "triton":
            return True
        fits = choose_int4_path(linear.weight.device, linear.in_features, linear.out_features) != "reference"
        return self.path is None and not fits and triton_unavailable_reason(linear.weight.device) is None

    def _make_kernel(self, linear: nn.Linear, isa: int) -> nn.Module:
        return Int4KernelLinear.from_linear(linear, isa, self.group_size, symmetric=self.symmetric)


def quantize_model(model: nn.Module, scheme: QuantScheme | str, *, group_size: int = 128,
                   skip: SkipFn | None = None, int4_kernel_dtype: torch.dtype | None = None,
                   cpu_kernel: str = "auto", int4_symmetric: bool = False, int4_path: str | None = None) -> QuantSummary:
    """Convert ``model`` in place. ``scheme`` is none | fp8 | int4. ``int4_kernel_dtype``: see int4.py
    (bf16 makes torch's int4 kernel usable under fp32 compute on a CPU, at bf16 rounding of activations).
    ``cpu_kernel`` (CPU models): auto uses kernels/quant_weights.py where it measures faster than torch's path,
    on forces it, off keeps torch's; the summary's ``kernel`` says which ran and why. ``int4_path`` names an
    Int4Linear path, or "triton" (CUDA: quant/int4_triton.py)."""
    try:
        scheme = QuantScheme(scheme)
    except ValueError:
        raise ValueError(f"unknown quantization {scheme!r}; use one of "
                         f"{', '.join(s.value for s in QuantScheme)}") from None
    if scheme is QuantScheme.FP8:
        return Fp8WeightOnlyHandler(skip, cpu_kernel=cpu_kernel).convert(model)
    if scheme is QuantScheme.INT4:
        handler = Int4WeightOnlyHandler(group_size, skip, path=int4_path, cpu_kernel=cpu_kernel,
                                        symmetric=int4_symmetric)
        handler.kernel_dtype = int4_kernel_dtype
        return handler.convert(model)
    size = model_weight_bytes(model)
    return QuantSummary(scheme, 0, len(_linears(model)), size, size, {})


@torch.no_grad()
def apply_imported_checkpoint(model: nn.Module, ckpt: ImportedCheckpoint,
                              rename: Callable[[str], str] | None = None) -> QuantSummary:
    """Swap in Int4Linear for every imported GPTQ/AWQ layer, then load the remaining dense tensors.

    ``rename`` maps a checkpoint name (e.g. HF's ``model.layers.0.mlp.up_proj``) to the model's.
    """
    rename = rename or (lambda s: s)
    before = model_weight_bytes(model)
    modules = dict(model.named_modules())
    paths: Counter[str] = Counter()
    for prefix, imported in ckpt.linears.items():
        name = rename(prefix)
        target = modules.get(name)
        if not isinstance(target, nn.Linear):
            raise QuantCheckpointError(f"checkpoint layer {prefix} maps to {name!r}, which is not an nn.Linear "
                                       "in this model")
        if (target.out_features, target.in_features) != imported.weights.shape:
            raise QuantCheckpointError(f"{prefix}: checkpoint shape {imported.weights.shape} does not match the "
                                       f"model's {(target.out_features, target.in_features)}")
        bias = ckpt.tensors.get(f"{prefix}.bias")
        layer = Int4Linear(imported.weights, bias, target.weight.device, input_perm=imported.input_perm,
                           scale_dtype=target.weight.dtype)
        _set_module(model, name, layer)
        paths[layer.path] += 1
    dense = {rename(k): v for k, v in ckpt.tensors.items()
             if not any(k == f"{p}.bias" for p in ckpt.linears)}
    missing, unexpected = model.load_state_dict(dense, strict=False)
    swapped = {rename(p) for p in ckpt.linears}
    missing = [m for m in missing if m.rsplit(".", 1)[0] not in swapped]  # set above, from the packed tensors
    if getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        missing = [m for m in missing if m != "lm_head.weight"]            # it is the embedding table
    if unexpected:
        raise QuantCheckpointError(f"checkpoint tensors the model does not have: {unexpected[:5]}")
    if missing:
        raise QuantCheckpointError(f"model tensors the checkpoint lacks: {missing[:5]}")
    return QuantSummary(QuantScheme.INT4, len(ckpt.linears), 0, before, model_weight_bytes(model), dict(paths),
                        ckpt.config.group_size)
