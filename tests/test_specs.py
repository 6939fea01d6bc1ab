"""triage/core/specs.py: the spec-sheet table and NVML name matching."""
import pytest

from triage.core import specs

REQUIRED = ("h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "l4", "rtx-4090",
            "rtx-5090", "b200")


@pytest.mark.parametrize("key", REQUIRED)
def test_every_required_gpu_is_a_labelled_spec_sheet_entry(key):
    s = specs.GPU_SPECS[key]
    assert s.kind == "spec-sheet" and s.source
    assert s.vram_bytes >= 22 * specs.GIB
    assert 0.2e12 <= s.hbm_bandwidth_bytes_per_s <= 10e12
    assert s.bf16_flops_per_s > 100e12
    assert s.fp8_flops_per_s is None or s.fp8_flops_per_s >= s.bf16_flops_per_s
    assert s.as_dict()["kind"] == "spec-sheet"


def test_headline_figures():
    h100 = specs.GPU_SPECS["h100-sxm"]
    assert h100.vram_bytes == 80 * specs.GIB
    assert h100.hbm_bandwidth_bytes_per_s == 3.35e12
    assert h100.bf16_flops_per_s == pytest.approx(989.4e12)
    assert h100.fp8_flops_per_s == pytest.approx(2 * 989.4e12, rel=1e-3)
    assert specs.GPU_SPECS["h200"].hbm_bandwidth_bytes_per_s == 4.8e12
    assert specs.GPU_SPECS["b200"].nvlink_bytes_per_s == 1.8e12
    # Ampere has no FP8 tensor cores; consumer and L-series cards have no NVLink.
    assert not specs.GPU_SPECS["a100-80gb"].supports_fp8
    assert specs.GPU_SPECS["l40s"].nvlink_bytes_per_s is None
    assert specs.GPU_SPECS["rtx-4090"].nvlink_bytes_per_s is None


@pytest.mark.parametrize(("nvml", "mem_gib", "key"), [
    ("NVIDIA H100 80GB HBM3", 79.6, "h100-sxm"),
    ("NVIDIA H100 PCIe", 79.6, "h100-pcie"),
    ("NVIDIA H100 NVL", 93.6, "h100-nvl"),
    ("NVIDIA H200", 140.4, "h200"),
    ("NVIDIA A100-SXM4-40GB", 40, "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", 80, "a100-80gb"),
    ("NVIDIA A100 80GB PCIe", 80, "a100-80gb-pcie"),
    ("NVIDIA A100-PCIE-40GB", 40, "a100-40gb"),
    ("NVIDIA L40S", 45, "l40s"),
    ("NVIDIA L4", 22.5, "l4"),
    ("NVIDIA L40", 45, "l40"),
    ("NVIDIA A10", 22.5, "a10"),
    ("NVIDIA GeForce RTX 4090", 24, "rtx-4090"),
    ("NVIDIA GeForce RTX 5090", 31.8, "rtx-5090"),
    ("NVIDIA B200", 179, "b200"),
])
def test_nvml_names_map_to_entries(nvml, mem_gib, key):
    assert specs.match_nvml_name(nvml, int(mem_gib * specs.GIB)).key == key


def test_unknown_nvml_name_is_none_and_memory_breaks_an_a100_tie():
    assert specs.match_nvml_name("NVIDIA GeForce GTX 1080") is None
    assert specs.match_nvml_name("NVIDIA A10G") is None    # the AWS part is not the A10
    assert specs.match_nvml_name("NVIDIA A100", 80 * specs.GIB).key == "a100-80gb"
    assert specs.match_nvml_name("NVIDIA A100", 40 * specs.GIB).key == "a100-40gb"


@pytest.mark.parametrize(("name", "key"), [("H100", "h100-sxm"), ("h100-sxm", "h100-sxm"),
                                          ("RTX4090", "rtx-4090"), ("A100", "a100-80gb"), ("l4", "l4")])
def test_get_spec_by_key_or_alias(name, key):
    assert specs.get_spec(name).key == key


def test_get_spec_unknown_is_none():
    assert specs.get_spec("tpu-v5") is None


def test_tensor_flops_falls_back_to_bf16_without_the_tensor_cores():
    a100, h100 = specs.GPU_SPECS["a100-80gb"], specs.GPU_SPECS["h100-sxm"]
    assert specs.tensor_flops_per_s(a100, "fp8") == a100.bf16_flops_per_s
    assert specs.tensor_flops_per_s(a100, "int8") == a100.int8_ops_per_s
    assert specs.tensor_flops_per_s(h100, "fp8") == h100.fp8_flops_per_s
    assert specs.tensor_flops_per_s(h100, "int4") == h100.bf16_flops_per_s


def test_spec_table_and_rules_import_without_torch():
    """The rules read this table, and the rules are pure: importing either must not pull in torch."""
    import subprocess
    import sys
    code = "import sys, triage.rules, triage.core.specs; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
