"""The host probes: `cpu` (probes/cpu_numa.py), `memory` (probes/memory.py), `storage`
(probes/storage.py) and `network` (probes/network.py)."""
from __future__ import annotations

from triage.core.probe_data.base import Payload, payload


@payload
class NumaNode:
    node: int | None = None
    cpus: tuple[int, ...] = ()


@payload
class CpuData(Payload):
    """The host CPUs: model, cores, frequency governor, per-core utilization from two /proc/stat
    reads over the window, and the NUMA nodes from /sys."""

    PROBE = "cpu"

    model: str | None = None
    num_physical_cores: int | None = None
    num_logical_cpus: int | None = None
    governor: str | None = None                      # the most common one
    governors: dict[str, int] | None = None          # governor -> number of CPUs
    freq_mhz_current: float | None = None            # mean of scaling_cur_freq
    freq_mhz_max: float | None = None
    window_s: float | None = None
    per_core_util_pct: tuple[float | None, ...] | None = None   # None for a CPU with no ticks
    numa_nodes: tuple[NumaNode, ...] | None = None
    unsupported_fields: tuple[str, ...] = ()


@payload
class MemoryData(Payload):
    """/proc/meminfo and /proc/vmstat over the window, and a bounded memory-copy bandwidth
    (median of numpy copies of a 64 MiB buffer, read + write, ~0.8 s, run after the window)."""

    PROBE = "memory"

    total_bytes: int | None = None
    available_bytes: int | None = None
    available_pct: float | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_in_bytes_delta: float | None = None
    swap_out_bytes_delta: float | None = None
    window_s: float | None = None
    copy_bandwidth_gbps: float | None = None        # numpy copies of 64 MiB, read + write, 1e9 bytes/s
    unsupported_fields: tuple[str, ...] = ()


@payload
class StorageData(Payload):
    """The model's files and the Hugging Face cache. The read is bounded by `max_read_bytes` (256 MiB)
    and ~1.5 s. Status `unsupported` when the server is reached by URL but its process is not visible here
    (another host or a container) and no `--model` was given: this host's disk would say nothing about it."""

    PROBE = "storage"

    model: str | None = None                        # as the server names it
    model_dir: str | None = None
    model_dir_fstype: str | None = None
    model_dir_is_network_fs: bool | None = None
    read_gbps: float | None = None
    read_bytes: int | None = None                   # None when no model files could be read
    max_read_bytes: int | None = None
    page_cache_warm: bool | None = None             # the storage layer delivered < 10 % of the bytes read
    hf_cache_dir: str | None = None
    hf_cache_fstype: str | None = None
    hf_cache_persistent: bool | None = None         # False on tmpfs/ramfs/overlay
    hf_cache_empty: bool | None = None
    hf_home_set: bool | None = None
    serves_hub_model_id: bool | None = None
    seen_from: str | None = None                    # "server": its own env, mounts and root; "triage": ours
    unsupported_fields: tuple[str, ...] = ()


@payload
class NetworkData(Payload):
    """DNS, TCP connect and /health time to first byte, each sample on a fresh connection (as
    `curl -w` does); over https only DNS and TCP are timed. It runs alone, before every other probe, so its
    millisecond timings do not include waits on triage's own probe threads."""

    PROBE = "network"

    url: str | None = None
    host: str | None = None
    port: int | None = None
    same_host: bool | None = None
    num_samples: int | None = None
    dns_ms_p50: float | None = None
    tcp_connect_ms_p50: float | None = None
    health_ttfb_ms_p50: float | None = None          # http only
    health_status_code: int | None = None
    errors: tuple[str, ...] = ()
