"""GPU spec-sheet figures: memory, bandwidth and peak tensor throughput.

Every number here is a vendor spec-sheet figure, not a measurement: `kind` says so on each entry,
and `source` names the document. Throughput is *dense* (no 2:4 sparsity). Memory capacities are the
marketing figure read as GiB (HBM and GDDR come in binary sizes); the driver reports a little less,
so `triage plan --from-diagnose` prefers the measured NVML total.

GeForce cards (RTX 4090/5090) run FP16/BF16/FP8 tensor math at half rate when accumulating in FP32,
which is what inference kernels do; their figures below are the FP32-accumulate ones.

Pure data and lookups: nothing here touches a GPU. `triage/core/roofline.py` turns these into
bounds; measured host figures live next to them in the baseline report, never in this table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 2**30
TERA = 1e12

SPEC_KIND = "spec-sheet"


@dataclass(frozen=True, slots=True)
class GpuSpec:
    key: str                                  # the name users type: "h100-sxm"
    name: str                                 # the product name
    architecture: str                         # ampere | ada | hopper | blackwell
    compute_capability: tuple[int, int]
    vram_bytes: int
    hbm_bandwidth_bytes_per_s: float          # device memory bandwidth (HBM or GDDR)
    bf16_flops_per_s: float                   # dense tensor-core peak
    fp16_flops_per_s: float
    fp8_flops_per_s: float | None             # None: no FP8 tensor cores
    int8_ops_per_s: float | None
    nvlink_bytes_per_s: float | None          # total bidirectional per GPU; None: PCIe only
    tdp_w: float
    source: str
    aliases: tuple[str, ...] = ()
    kind: str = SPEC_KIND

    @property
    def supports_fp8(self) -> bool:
        return self.fp8_flops_per_s is not None

    def as_dict(self) -> dict[str, object]:
        return {
            "key": self.key, "name": self.name, "architecture": self.architecture,
            "compute_capability": list(self.compute_capability), "vram_bytes": self.vram_bytes,
            "hbm_bandwidth_bytes_per_s": self.hbm_bandwidth_bytes_per_s,
            "bf16_flops_per_s": self.bf16_flops_per_s, "fp16_flops_per_s": self.fp16_flops_per_s,
            "fp8_flops_per_s": self.fp8_flops_per_s, "int8_ops_per_s": self.int8_ops_per_s,
            "nvlink_bytes_per_s": self.nvlink_bytes_per_s, "tdp_w": self.tdp_w,
            "source": self.source, "kind": self.kind,
        }


def _spec(key: str, name: str, arch: str, cc: tuple[int, int], vram_gib: float, bw_tbs: float,
          bf16_tflops: float, fp8_tflops: float | None, int8_tops: float | None,
          nvlink_gbs: float | None, tdp_w: float, source: str, aliases: tuple[str, ...] = (),
          fp16_tflops: float | None = None) -> GpuSpec:
    return GpuSpec(
        key=key, name=name, architecture=arch, compute_capability=cc,
        vram_bytes=int(vram_gib * GIB), hbm_bandwidth_bytes_per_s=bw_tbs * TERA,
        bf16_flops_per_s=bf16_tflops * TERA,
        fp16_flops_per_s=(fp16_tflops if fp16_tflops is not None else bf16_tflops) * TERA,
        fp8_flops_per_s=None if fp8_tflops is None else fp8_tflops * TERA,
        int8_ops_per_s=None if int8_tops is None else int8_tops * TERA,
        nvlink_bytes_per_s=None if nvlink_gbs is None else nvlink_gbs * 1e9,
        tdp_w=tdp_w, source=source, aliases=aliases,
    )


_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (dense figures = half the sparsity figures)"
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (dense figures)"

GPU_SPECS: dict[str, GpuSpec] = {s.key: s for s in (
    _spec("h100-sxm", "NVIDIA H100 SXM5 80GB", "hopper", (9, 0), 80, 3.35, 989.4, 1978.9, 1978.9,
          900, 700, _H100_DS, ("h100", "h100sxm", "h100-sxm5", "h100-80gb-hbm3")),
    _spec("h100-pcie", "NVIDIA H100 PCIe 80GB", "hopper", (9, 0), 80, 2.0, 756.5, 1513.0, 1513.0,
          600, 350, _H100_DS + "; NVLink via bridge", ("h100pcie",)),
    _spec("h100-nvl", "NVIDIA H100 NVL 94GB", "hopper", (9, 0), 94, 3.9, 835.5, 1670.5, 1670.5,
          600, 400, _H100_DS + " (H100 NVL column)", ("h100nvl",)),
    _spec("h200", "NVIDIA H200 SXM 141GB", "hopper", (9, 0), 141, 4.8, 989.4, 1978.9, 1978.9,
          900, 700, "NVIDIA H200 Tensor Core GPU datasheet (SXM column, dense figures)",
          ("h200-sxm", "h200sxm")),
    _spec("a100-40gb", "NVIDIA A100 SXM4 40GB", "ampere", (8, 0), 40, 1.555, 312.0, None, 624.0,
          600, 400, _A100_DS, ("a100-40", "a100-sxm4-40gb", "a100-pcie-40gb")),
    _spec("a100-80gb", "NVIDIA A100 SXM4 80GB", "ampere", (8, 0), 80, 2.039, 312.0, None, 624.0,
          600, 400, _A100_DS + " (SXM column)", ("a100", "a100-80", "a100-sxm4-80gb")),
    _spec("a100-80gb-pcie", "NVIDIA A100 PCIe 80GB", "ampere", (8, 0), 80, 1.935, 312.0, None, 624.0,
          600, 300, _A100_DS + " (PCIe column; NVLink via bridge)", ("a100-pcie", "a100-pcie-80gb")),
    # The ECC-enabled GDDR6 parts' "48 GB" / "24 GB" are decimal: NVML reports ~45 / ~22.5 GiB.
    _spec("l40s", "NVIDIA L40S", "ada", (8, 9), 48e9 / GIB, 0.864, 362.05, 733.0, 733.0, None, 350,
          "NVIDIA L40S datasheet (dense figures)"),
    _spec("l40", "NVIDIA L40", "ada", (8, 9), 48e9 / GIB, 0.864, 181.05, 362.05, 362.05, None, 300,
          "NVIDIA L40 datasheet (dense figures)"),
    _spec("a10", "NVIDIA A10", "ampere", (8, 6), 24e9 / GIB, 0.600, 125.0, None, 250.0, None, 150,
          "NVIDIA A10 Tensor Core GPU datasheet (dense figures)"),
    _spec("l4", "NVIDIA L4", "ada", (8, 9), 24e9 / GIB, 0.300, 121.0, 242.5, 242.5, None, 72,
          "NVIDIA L4 Tensor Core GPU datasheet (dense figures)"),
    _spec("rtx-4090", "NVIDIA GeForce RTX 4090", "ada", (8, 9), 24, 1.008, 165.2, 330.3, 660.6, None, 450,
          "NVIDIA Ada Lovelace architecture whitepaper, appendix (dense, FP32 accumulate)",
          ("4090", "rtx4090", "geforce-rtx-4090")),
    _spec("rtx-5090", "NVIDIA GeForce RTX 5090", "blackwell", (12, 0), 32, 1.792, 209.5, 419.0, 838.0,
          None, 575, "NVIDIA RTX Blackwell GPU architecture whitepaper (dense, FP32 accumulate)",
          ("5090", "rtx5090", "geforce-rtx-5090")),
    _spec("b200", "NVIDIA B200 (HGX) 180GB", "blackwell", (10, 0), 180, 8.0, 2250.0, 4500.0, 4500.0,
          1800, 1000, "NVIDIA HGX B200 specifications (per GPU, dense; 192 GB HBM3e on package, "
          "180 GB usable)", ("b200-hgx",)),
)}


def _norm(text: str) -> str:
    text = text.lower().replace("geforce", " ").replace("nvidia", " ").replace("tesla", " ")
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")


_BY_NAME: dict[str, str] = {}
for _s in GPU_SPECS.values():
    for _n in (_s.key, *_s.aliases):
        _BY_NAME[_norm(_n)] = _s.key


def spec_keys() -> list[str]:
    return list(GPU_SPECS)


def get_spec(name: str) -> GpuSpec | None:
    """A spec by its key or an alias ("h100-sxm", "H100", "rtx4090"); None when unknown."""
    key = _BY_NAME.get(_norm(name))
    if key is None:
        key = _BY_NAME.get(_norm(name).replace("-", ""))
    return GPU_SPECS.get(key) if key else None


# NVML name tokens -> the spec key, first match wins (H100 and A100 variants are told apart in functions).
_NAME_TOKENS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"b200"}), "b200"), (frozenset({"h200"}), "h200"),
    (frozenset({"l40s"}), "l40s"), (frozenset({"l40"}), "l40"),
    (frozenset({"a10"}), "a10"),     # not the A10G (AWS part, different clocks): that name is its own token
    (frozenset({"l4"}), "l4"),
    (frozenset({"rtx", "4090"}), "rtx-4090"), (frozenset({"rtx", "5090"}), "rtx-5090"),
)


def _h100(tokens: set[str]) -> str:
    if "nvl" in tokens:
        return "h100-nvl"
    return "h100-pcie" if "pcie" in tokens else "h100-sxm"   # "NVIDIA H100 80GB HBM3" is the SXM part


def _a100(tokens: set[str], mem_gib: float | None) -> str:
    is_80 = "80gb" in tokens or (mem_gib is not None and mem_gib > 48)
    if not is_80:
        return "a100-40gb"
    return "a100-80gb-pcie" if "pcie" in tokens else "a100-80gb"


def match_nvml_name(nvml_name: str, memory_total_bytes: int | None = None) -> GpuSpec | None:
    """The spec entry for a GPU name as NVML reports it ("NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 4090"); None when the table has no such GPU.
    The memory total, when given, tells the 40 GB and 80 GB A100 apart if the name does not."""
    tokens = set(_norm(nvml_name).split("-"))
    mem_gib = None if memory_total_bytes is None else memory_total_bytes / GIB
    for needs, key in _NAME_TOKENS[:2]:
        if needs <= tokens:
            return GPU_SPECS[key]
    if "h100" in tokens:
        return GPU_SPECS[_h100(tokens)]
    if "a100" in tokens:
        return GPU_SPECS[_a100(tokens, mem_gib)]
    key = next((key for needs, key in _NAME_TOKENS[2:] if needs <= tokens), None)
    return GPU_SPECS[key] if key else None


def tensor_flops_per_s(spec: GpuSpec, compute_dtype: str) -> float:
    """Peak dense FLOP/s for matmuls whose *activations* run in `compute_dtype`.

    fp8 and int8 use their own tensor cores where the GPU has them, else fall back to bf16 (vLLM then
    runs the weights dequantized, e.g. FP8 weight-only Marlin on Ampere). Weight-only int4 computes
    in bf16.
    """
    if compute_dtype == "fp8" and spec.fp8_flops_per_s is not None:
        return spec.fp8_flops_per_s
    if compute_dtype == "int8" and spec.int8_ops_per_s is not None:
        return spec.int8_ops_per_s
    if compute_dtype == "fp16":
        return spec.fp16_flops_per_s
    return spec.bf16_flops_per_s


# --- PCIe links ---------------------------------------------------------------------------------
# Per-lane raw rate (GT/s) and line-code efficiency, per direction, from the PCI-SIG base specs:
# Gen1/2 use 8b/10b, Gen3-5 128b/130b, Gen6 PAM4 FLIT mode (242 payload bytes of 256).
PCIE_LANE_GT_PER_S: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING: dict[int, float] = {1: 0.8, 2: 0.8, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}
PCIE_SOURCE = "PCI-SIG PCI Express Base Specification 1.0-6.0 (per-lane GT/s and line encoding)"


def pcie_bytes_per_s(generation: int, width: int) -> float | None:
    """The theoretical one-direction data rate of a PCIe link (Gen5 x16: 63.0 GB/s; Gen3 x8: 7.9 GB/s),
    before packet (TLP) overhead; None for an unknown generation or width."""
    if generation not in PCIE_LANE_GT_PER_S or not isinstance(width, int) or width < 1:
        return None
    return PCIE_LANE_GT_PER_S[generation] * 1e9 * PCIE_ENCODING[generation] * width / 8
