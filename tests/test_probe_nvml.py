"""The gpu probe against a fake pynvml with the real function names (tests/fixtures/nvml/)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.nvml.fake_pynvml import FakeNvml, load
from triage.core.probe_data import GpuPair, NvLinkErrors
from triage.core.snapshot import ProbeStatus
from triage.probes.gpu import probe_gpu
from triage.probes.nvml import decode_clock_event_reasons

SYS = str(Path(__file__).parent / "fixtures" / "sysfs" / "two_node_powersave")


def run(nvml, window_s=0.0):
    return probe_gpu(nvml=nvml, window_s=window_s, sys_root=SYS, sleep=lambda s: None)


def test_fake_uses_only_real_pynvml_names():
    pynvml = pytest.importorskip("pynvml")
    fake_names = [n for n in dir(FakeNvml) if n.startswith("nvml") and callable(getattr(FakeNvml, n))]
    missing = [n for n in fake_names if not hasattr(pynvml, n)]
    assert fake_names and not missing


def test_healthy_pair_with_nvlink():
    nvml = load("h100_x2_healthy_nvlink.json")
    r = run(nvml)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.driver_version == "550.54.15"
    assert d.cuda_driver_version == "12.4"
    assert d.num_gpus == 2
    g0 = d.gpus[0]
    assert g0.name == "NVIDIA H100 80GB HBM3"
    assert g0.compute_capability == (9, 0)
    assert g0.memory_total_bytes == 80 * 2**30
    assert g0.memory_reserved_bytes == 512 * 2**20
    assert g0.power_limit_enforced_w == 700.0 and g0.power_usage_w == 550.0
    assert g0.clock_event_reasons == () and g0.clock_event_reasons_source == "clocks_event"
    assert g0.numa_node == 0 and g0.numa_node_source == "nvml"
    assert g0.pcie_link_gen_current == 5 and g0.pcie_link_width_current == 16
    assert g0.pcie_read_utilization_gpu_pct is not None
    assert [link.active for link in g0.nvlink] == [True, True]
    assert g0.nvlink[0].errors == NvLinkErrors(replay=0, recovery=0, crc_flit=0, crc_data=0)
    assert g0.unsupported_fields == ()
    assert g0.lost is False
    assert d.topology == (GpuPair(gpu_a=0, gpu_b=1, common_ancestor="node", nvlink=True),)
    assert nvml.shutdown_called


def test_window_samples_utilization_and_diffs_throttle_counters():
    nvml = load("a100_power_capped_pcie_gen3x8.json")
    r = probe_gpu(nvml=nvml, window_s=3.0, sys_root=SYS, sample_interval_s=1.0, sleep=lambda s: None)
    assert r.status is ProbeStatus.OK
    g = r.data.gpus[0]
    assert g.throttle_time_delta_us.power == pytest.approx(1.5e6)      # 1.5 s of ns counter
    assert g.throttle_time_frac.power == pytest.approx(0.5)           # over a 3 s window
    assert g.throttle_time_delta_us.thermal == 0.0
    assert g.clock_event_reasons == ("sw_power_cap", "hw_power_brake_slowdown")
    assert g.clock_event_reasons_bitmask == 0x84
    assert g.power_limit_enforced_w == 300.0 and g.power_limit_default_w == 400.0
    assert (g.pcie_link_gen_current, g.pcie_link_width_current) == (3, 8)
    assert (g.pcie_link_gen_max, g.pcie_link_width_max) == (4, 16)
    assert g.pcie_replay_count == 37
    assert g.ecc_uncorrected_volatile == 1 and g.ecc_uncorrected_aggregate == 2
    assert g.remapped_rows_pending is True and g.remapped_rows_uncorrectable == 2
    # NVML's NUMA call is NotSupported: the PCI device's sysfs numa_node answers.
    assert (g.numa_node, g.numa_node_source) == (1, "sysfs")
    assert g.utilization_gpu_pct_max >= g.utilization_gpu_pct


def test_not_supported_fields_are_none_and_listed():
    r = run(load("rtx4090_not_supported_fields.json"))
    assert r.status is ProbeStatus.OK
    g = r.data.gpus[0]
    for key in ("ecc_mode_enabled", "ecc_corrected_volatile", "remapped_rows_pending", "retired_pages_sbe",
                "mig_mode_enabled", "power_limit_default_w", "compute_processes", "throttle_time_delta_us"):
        assert getattr(g, key) is None, key
        assert key in g.unsupported_fields, key
    # The rest of the GPU still reports.
    assert g.name == "NVIDIA GeForce RTX 4090"
    assert g.sm_clock_mhz == 1980
    # NUMA from the affinity mask (CPUs 0-7 = node 0), since NVML and sysfs say nothing.
    assert (g.numa_node, g.numa_node_source) == (0, "affinity")


def test_old_driver_falls_back_to_throttle_reasons():
    nvml = load("v100_old_driver_470.json")
    r = run(nvml)
    assert r.status is ProbeStatus.OK
    g = r.data.gpus[0]
    assert g.clock_event_reasons_source == "throttle_reasons"
    assert g.clock_event_reasons == ("hw_slowdown", "hw_thermal_slowdown")
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in nvml.calls
    assert "clock_event_reasons" not in g.unsupported_fields
    # No memory v2: total still read, reserved unknown and listed.
    assert g.memory_total_bytes == 80 * 2**30
    assert g.memory_reserved_bytes is None and "memory_reserved_bytes" in g.unsupported_fields
    assert g.pcie_link_gen_gpu_max is None and "pcie_link_gen_gpu_max" in g.unsupported_fields
    assert r.data.cuda_driver_version == "11.4"


def test_old_binding_without_the_function_falls_back_too():
    nvml = load("h100_x2_healthy_nvlink.json", absent_functions=["nvmlDeviceGetCurrentClocksEventReasons"])
    g = (run(nvml).data).gpus[0]
    assert g.clock_event_reasons_source == "throttle_reasons"
    assert g.clock_event_reasons == ()


def test_lost_gpu_is_marked_and_others_still_report():
    r = run(load("h100_x3_gpu_lost.json"))
    assert r.status is ProbeStatus.OK
    g0, g1, g2 = r.data.gpus
    assert g0.lost is False and g0.power_usage_w == 550.0
    assert g1.lost is True
    assert g1.name == "NVIDIA H100 80GB HBM3"        # read before it fell off
    assert g1.power_usage_w is None and "*" in g1.unsupported_fields   # never read
    assert g2.lost is True and g2.name is None
    # Topology only between the GPUs still there.
    assert r.data.topology == ()


def test_no_nvml_library_is_unsupported_with_reason():
    r = run(load("h100_x2_healthy_nvlink.json", init_error=12))
    assert r.status is ProbeStatus.UNSUPPORTED
    assert "NVIDIA driver" in r.reason
    assert r.data is None


def test_permission_denied():
    r = run(load("h100_x2_healthy_nvlink.json", init_error=4))
    assert r.status is ProbeStatus.PERMISSION_DENIED


def test_this_host_has_no_gpu_and_says_so():
    r = probe_gpu(window_s=0.0)   # the real pynvml on a CPU-only host
    assert r.status in (ProbeStatus.UNSUPPORTED, ProbeStatus.OK)
    if r.status is ProbeStatus.UNSUPPORTED:
        assert r.reason


def test_decode_unknown_bits():
    assert decode_clock_event_reasons(0x1 | 0x1000) == ["gpu_idle", "unknown_0x1000"]


def test_field_value_union_names_match_pynvml():
    pynvml = pytest.importorskip("pynvml")
    from triage.probes.nvml import _FIELD_VALUE_ATTR

    union_fields = [name for name, _ in pynvml.c_nvmlValue_t._fields_]
    assert set(_FIELD_VALUE_ATTR.values()) <= set(union_fields)
    assert _FIELD_VALUE_ATTR[pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG] == "ullVal"
    from triage.probes.nvml import THROTTLE_FIELDS
    assert THROTTLE_FIELDS["power"] == pynvml.NVML_FI_DEV_PERF_POLICY_POWER
    assert THROTTLE_FIELDS["total_base_clocks"] == pynvml.NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS


def test_hard_coded_nvml_constants_match_pynvml():
    pynvml = pytest.importorskip("pynvml")
    from triage.probes import nvml as probe

    assert (probe._CLOCK_SM, probe._CLOCK_MEM) == (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM)
    assert probe._TEMPERATURE_THRESHOLD_SLOWDOWN == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    assert probe.ERROR_GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST
    assert probe._ERROR_NOT_SUPPORTED == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert probe._RETIRE_DBE == pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    assert probe._NVLINK_ERRORS["crc_data"] == pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA
    assert probe.TOPOLOGY[pynvml.NVML_TOPOLOGY_HOSTBRIDGE] == "hostbridge"
    bits = {pynvml.nvmlClocksEventReasonSwPowerCap: "sw_power_cap",
            pynvml.nvmlClocksEventReasonHwThermalSlowdown: "hw_thermal_slowdown",
            pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown: "hw_power_brake_slowdown"}
    for bit, name in bits.items():
        assert probe.CLOCK_EVENT_BITS[bit] == name
