"""cpu, memory, kernel_log, storage and logs probes on captured-format /proc, /sys and log fixtures."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from triage.core.snapshot import ProbeStatus
from triage.probes.cpu_numa import per_core_util_pct, probe_cpu
from triage.probes.kernel_log import probe_kernel_log
from triage.probes.logs import probe_logs, read_tail
from triage.probes.memory import copy_bandwidth_gbps, probe_memory
from triage.probes.storage import fstype_of, parse_mounts, probe_storage

FIX = Path(__file__).parent / "fixtures"
PROC = FIX / "procfs" / "swapping_host"
SYS = FIX / "sysfs" / "two_node_powersave"


@pytest.fixture
def proc_root(tmp_path):
    root = tmp_path / "proc"
    shutil.copytree(PROC, root)
    return root


def advance(root: Path):
    """A fake sleep: the window passes by putting the `.after` files in place."""
    def sleep(_s: float) -> None:
        for name in ("stat", "vmstat"):
            shutil.copy(root / f"{name}.after", root / name)
    return sleep


def test_per_core_util_from_proc_stat_deltas():
    util = per_core_util_pct((PROC / "stat").read_text(), (PROC / "stat.after").read_text())
    assert util[0] == 100.0           # 200 busy ticks of 200
    assert util[1] == 0.0             # only idle ticks
    assert util[2] == pytest.approx(42.9)
    assert util[3] is None            # no ticks at all: unmeasured, not 0


def test_cpu_probe_on_fixture_trees(proc_root):
    r = probe_cpu(window_s=1.0, proc_root=str(proc_root), sys_root=str(SYS), sleep=advance(proc_root))
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.model == "AMD EPYC 7763 64-Core Processor"
    assert d.num_physical_cores == 2          # 4 logical CPUs on 2 cores
    assert d.num_logical_cpus == 4
    assert d.governor == "powersave"
    assert d.governors == {"powersave": 12, "performance": 4}
    assert d.freq_mhz_current == 1200.0 and d.freq_mhz_max == 3500.0
    assert d.per_core_util_pct[0] == 100.0
    assert [(n.node, list(n.cpus)) for n in d.numa_nodes] == [(0, list(range(8))), (1, list(range(8, 16)))]
    assert d.window_s == 1.0


def test_cpu_probe_without_proc_is_unsupported(tmp_path):
    r = probe_cpu(window_s=0, proc_root=str(tmp_path / "none"), sys_root=str(tmp_path / "none"),
                  sleep=lambda s: None)
    assert r.status is ProbeStatus.UNSUPPORTED
    assert "stat" in r.reason


def test_memory_probe_swap_traffic_and_bandwidth(proc_root):
    r = probe_memory(window_s=2.0, proc_root=str(proc_root), sleep=advance(proc_root), bandwidth=lambda s: 12.5)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.total_bytes == 65536000 * 1024
    assert d.available_pct == pytest.approx(2.0)
    assert d.swap_used_bytes == (8388608 - 4194304) * 1024
    page = 4096
    assert d.swap_in_bytes_delta == 256 * page
    assert d.swap_out_bytes_delta == 512 * page
    assert d.copy_bandwidth_gbps == 12.5


def test_real_copy_bandwidth_is_positive_and_bounded_in_time():
    import time

    t0 = time.perf_counter()
    gbps = copy_bandwidth_gbps(budget_s=0.1, buffer_bytes=4 * 2**20)
    elapsed = time.perf_counter() - t0
    assert gbps is not None and gbps > 0
    # The budget bounds the loop (at most 200 copies, at least 2): far below a runaway on a shared box.
    assert elapsed < 2.0, f"the 0.1 s budget ran {elapsed:.2f} s"


def test_memory_probe_without_meminfo(tmp_path):
    r = probe_memory(window_s=0, proc_root=str(tmp_path), sleep=lambda s: None, bandwidth=lambda s: None)
    assert r.status is ProbeStatus.UNSUPPORTED


def test_kernel_log_from_a_saved_dmesg():
    r = probe_kernel_log(path=str(FIX / "logs" / "dmesg_xid79.txt"))
    assert r.status is ProbeStatus.OK
    d = r.data
    assert [e.xid for e in d.xid_events] == [79, 48, 63]
    assert d.xid_events[0].pci_bus_id == "0000:3b:00"
    assert d.xid_events[0].meaning == "GPU has fallen off the bus"
    assert d.xid_counts == {"48": 1, "63": 1, "79": 1}
    assert d.num_lines_read == 7


def test_kernel_log_denied_says_how_to_read_it(tmp_path):
    r = probe_kernel_log(run_dmesg=lambda: (None, "dmesg: read kernel buffer failed: Operation not permitted"),
                         kmsg_path=str(tmp_path / "no-kmsg"))
    assert r.status is ProbeStatus.PERMISSION_DENIED
    assert "--kernel-log" in r.reason


def test_kernel_log_from_dmesg_output(tmp_path):
    lines = (FIX / "logs" / "dmesg_xid79.txt").read_text().splitlines()
    (tmp_path / "uptime").write_text("4834.57 9000.00\n")     # 3600 s after the Xid 79 line's stamp
    r = probe_kernel_log(run_dmesg=lambda: (lines, None), proc_root=str(tmp_path))
    assert r.data.source == "dmesg" and r.data.num_xid_events == 3
    assert r.data.xid_events[0].age_s == pytest.approx(3600.0, abs=0.1)
    assert r.data.newest_xid_age_s == min(e.age_s for e in r.data.xid_events)


def test_saved_kernel_log_has_no_ages_and_no_uptime_gives_none(tmp_path):
    saved = probe_kernel_log(path=str(FIX / "logs" / "dmesg_xid79.txt"), proc_root=str(tmp_path))
    assert saved.data.newest_xid_age_s is None and saved.data.xid_events[0].age_s is None
    lines = (FIX / "logs" / "dmesg_xid79.txt").read_text().splitlines()
    live = probe_kernel_log(run_dmesg=lambda: (lines, None), proc_root=str(tmp_path / "none"))
    assert live.data.newest_xid_age_s is None


def test_kmsg_records_keep_their_boot_stamp(tmp_path):
    from triage.probes.kernel_log import _read_kmsg

    kmsg = tmp_path / "kmsg"
    kmsg.write_text("3,812,1234567900,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    (tmp_path / "uptime").write_text("1334.57 1.0\n")
    r = probe_kernel_log(run_dmesg=lambda: (None, "not permitted"), kmsg_path=str(kmsg), proc_root=str(tmp_path))
    assert r.data.source == str(kmsg)
    assert r.data.xid_events[0].xid == 79 and r.data.newest_xid_age_s == pytest.approx(100.0, abs=0.1)
    assert _read_kmsg(str(kmsg), 10)[0].startswith("[1234.567900] NVRM")


def test_logs_probe_finds_known_vllm_lines():
    r = probe_logs(str(FIX / "logs" / "vllm_v0_preempting_slow_tokenizer.log"))
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.slow_tokenizer is True
    assert d.num_preemption_lines == 2
    assert d.num_gpu_blocks == 2048
    # The fixture's V1 line ("GPU KV cache size") sits in a 0.6.3 log: read per version, a form 0.6 never wrote
    # is not taken (vLLM logs its KV size in tokens from V1, 0.8, on).
    assert d.engine == "vllm" and d.engine_version == "0.6.3"
    assert d.kv_cache_tokens is None
    assert d.max_concurrency == 8.0 and d.max_concurrency_tokens_per_request == 4096
    assert len(d.cuda_graph_hints) == 3      # capturing, the memory hint, capture finished
    assert d.num_nccl_errors == 1
    assert d.num_shm_broadcast_stalls == 1
    assert "sk-live" not in str(d) and "abcdefghijklmnopqrstuvwxyz" not in str(d)


def test_logs_probe_missing_file_and_no_file():
    assert probe_logs("/nonexistent/vllm.log").status is ProbeStatus.ERROR
    assert probe_logs(None).status is ProbeStatus.UNSUPPORTED


def test_read_tail_is_bounded(tmp_path):
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i}\n" for i in range(10000)))
    lines, truncated = read_tail(str(log), max_bytes=1000)
    assert truncated and lines[-1] == "line 9999" and len(lines) < 200
    assert all(line.startswith("line ") for line in lines)


def test_mounts_pick_the_longest_mount_point():
    mounts = parse_mounts("rootfs / ext4 rw 0 0\nsrv:/models /mnt/models nfs4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n")
    assert fstype_of("/mnt/models/llama", mounts) == "nfs4"
    assert fstype_of("/mnt/modelsx", mounts) == "ext4"


def test_storage_probe_nfs_model_and_tmpfs_cache(tmp_path):
    model_dir = tmp_path / "models" / "llama"
    model_dir.mkdir(parents=True)
    (model_dir / "model-00001.safetensors").write_bytes(b"\x01" * (3 * 2**20))
    (model_dir / "config.json").write_text("{}")
    cache = tmp_path / "hf"
    (cache / "hub").mkdir(parents=True)
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)            # the server's /proc entry, its root not enterable
    (proc / "4242" / "mounts").write_text(f"rootfs / ext4 rw 0 0\nsrv:/m {tmp_path / 'models'} nfs4 rw 0 0\n"
                                          f"tmpfs {cache} tmpfs rw 0 0\n")
    r = probe_storage(str(model_dir), env={"HF_HOME": str(cache)}, proc_root=str(proc),
                      max_read_bytes=2 * 2**20, read_budget_s=5.0, pid=4242)
    assert r.status is ProbeStatus.OK
    d = r.data
    assert d.model_dir_fstype == "nfs4" and d.model_dir_is_network_fs is True
    assert d.read_bytes == 2 * 2**20            # bounded by max_read_bytes, not the 3 MiB file
    assert d.read_gbps is not None and d.read_gbps > 0
    assert d.page_cache_warm is None           # no io file in the fixture /proc: unknown, not guessed
    assert d.hf_cache_fstype == "tmpfs" and d.hf_cache_persistent is False
    assert d.hf_cache_empty is True
    assert d.serves_hub_model_id is False


def test_storage_probe_hub_id_in_cache(tmp_path):
    snap = tmp_path / "hf" / "hub" / "models--org--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").write_bytes(b"\x00" * 4096)
    # Our own pid: /proc/PID/root is "/", entered as the server's root.
    r = probe_storage("org/tiny", env={"HF_HOME": str(tmp_path / "hf")}, proc_root="/proc",
                      max_read_bytes=2**20, read_budget_s=1.0, pid=os.getpid())
    d = r.data
    assert d.serves_hub_model_id is True
    assert d.model_dir.endswith(str(snap))
    assert d.read_bytes == 4096
    assert d.hf_cache_empty is False
    # The real /proc has an io file: the 4 KiB just written sits in the page cache.
    assert d.page_cache_warm in (True, None)


def test_storage_probe_unreadable_parts_are_unknown_not_zero_or_empty(tmp_path, monkeypatch):
    import triage.probes.storage

    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"\x00" * 4096)
    not_a_dir = tmp_path / "hf-is-a-file"
    not_a_dir.write_text("x")                       # listing it fails with an OSError other than "missing"

    def denied(*a, **k):
        raise PermissionError("denied")

    monkeypatch.setattr(triage.probes.storage, "read_speed", denied)
    d = probe_storage(str(model_dir), env={"HF_HUB_CACHE": str(not_a_dir)}, proc_root="/proc",
                      pid=os.getpid()).data
    assert d.read_bytes is None and d.read_gbps is None     # not "0 bytes read"
    assert d.hf_cache_empty is None                             # not "empty": NET002 must not fire on it
    assert {"read_bytes", "read_gbps", "hf_cache_empty"} <= set(d.unsupported_fields)
    missing = probe_storage(None, env={"HF_HUB_CACHE": str(tmp_path / "never-created")}, proc_root="/proc",
                            pid=os.getpid()).data
    assert missing.hf_cache_empty is True and missing.read_bytes is None


# --- the server's own view (issue: NET002 judged triage's own empty cache) -------------------------
def _container_proc(tmp_path, fs_of_data: str):
    """A fake /proc for a containerised server (pid 4242): its root is a directory tree of its own,
    its mount table says what /data is, and its environment points HF_HOME there."""
    proc = tmp_path / "proc"
    root = proc / "4242" / "root"
    (root / "data" / "hf" / "hub" / "models--org--tiny" / "snapshots" / "s1").mkdir(parents=True)
    (root / "data" / "hf" / "hub" / "models--org--tiny" / "snapshots" / "s1" / "model.safetensors").write_bytes(
        b"\x00" * 8192)
    (proc / "4242" / "mounts").write_text(f"overlay / overlay rw 0 0\n{fs_of_data} /data {fs_of_data} rw 0 0\n")
    return proc


def test_storage_reads_the_servers_own_cache_and_mounts(tmp_path):
    proc = _container_proc(tmp_path, "tmpfs")
    d = probe_storage("org/tiny", env={"HF_HOME": "/data/hf"}, proc_root=str(proc), pid=4242,
                      max_read_bytes=2**20, read_budget_s=1.0).data
    assert d.seen_from == "server" and d.hf_cache_dir == "/data/hf/hub"
    assert d.serves_hub_model_id is True and d.hf_cache_empty is False
    assert d.hf_cache_fstype == "tmpfs" and d.hf_cache_persistent is False
    assert d.read_bytes == 8192                       # read through /proc/4242/root
    persistent = probe_storage("org/tiny", env={"HF_HOME": "/data/hf"}, proc_root=str(_container_proc(
        tmp_path / "b", "ext4")), pid=4242).data
    assert persistent.hf_cache_persistent is True


def test_storage_without_the_servers_environment_judges_no_cache(tmp_path):
    proc = _container_proc(tmp_path, "ext4")
    r = probe_storage("org/tiny", env=None, proc_root=str(proc), pid=4242)
    assert r.status is ProbeStatus.PERMISSION_DENIED and "environ" in r.reason
    assert r.data.hf_cache_dir is None and r.data.hf_cache_empty is None
    # No server process at all (a local --model PATH): triage's own cache is never judged.
    own = probe_storage("org/tiny", env={"HF_HOME": str(tmp_path / "mine")}, proc_root="/proc").data
    assert own.hf_cache_dir is None and own.hf_cache_empty is None and own.seen_from == "triage"


def test_server_process_limits_and_user_come_from_its_own_proc_entries(tmp_path):
    from triage.probes.cgroup import read_limits

    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text("0::/kubepods/pod1/ctr\n")
    (proc / "4242" / "status").write_text("Name:\tpython\nUid:\t0\t0\t0\t0\n")
    cg = sys_root / "fs" / "cgroup" / "kubepods" / "pod1" / "ctr"
    cg.mkdir(parents=True)
    (cg / "cpu.max").write_text("400000 100000\n")
    (cg / "memory.max").write_text(str(64 * 2**30) + "\n")
    limits = read_limits(4242, str(proc), str(sys_root))
    assert (limits.cgroup_path, limits.cpu_quota_cores, limits.memory_max_bytes) == ("/kubepods/pod1/ctr", 4.0, 64 * 2**30)
    assert limits.uid == 0 and limits.user == "root"
    (cg / "cpu.max").write_text("max 100000\n")
    (cg / "memory.max").write_text("max\n")
    unlimited = read_limits(4242, str(proc), str(sys_root))
    assert unlimited.cpu_quota_cores is None and unlimited.memory_max_bytes is None
    assert read_limits(9999, str(proc), str(sys_root)).cgroup_path is None      # gone or not ours: unknown


def test_logs_probe_tells_startup_shm_warnings_from_serving_stalls(tmp_path):
    """vLLM warns about the shm broadcast block while it compiles at startup; only warnings after the ready
    line (or after no startup line at all) count as serving stalls for ENG007."""
    warn = ("WARNING 11-20 10:0{}:00 [shm_broadcast.py:501] No available shared memory broadcast block found in 60 "
            "seconds. This typically happens when some processes are hanging or doing some time-consuming work "
            "(e.g. compilation, weight/kv cache quantization).")
    log = tmp_path / "vllm.log"
    log.write_text("\n".join([
        "INFO 11-20 10:00:00 [api_server.py:1351] vLLM API server version 0.11.2",
        warn.format(1), warn.format(2),
        "INFO:     Application startup complete.",
        warn.format(5),
        "INFO 11-21 09:00:00 [api_server.py:1351] vLLM API server version 0.11.2",  # restarted
        warn.format(6),
        "INFO:     Application startup complete.",
    ]) + "\n")
    d = probe_logs(str(log)).data
    assert d.num_shm_broadcast_stalls == 4
    assert d.num_shm_broadcast_stalls_startup == 3
