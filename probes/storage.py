"""The `storage` probe: where the model and the HF cache live (NFS? tmpfs? overlay?) and how fast the
model files read, with the bytes read bounded and whether the page cache served them.

Whether the page cache served a read comes from /proc/thread-self/io: `read_bytes` there counts only
what the storage layer delivered. Keys: docs/SNAPSHOT.md, section `storage`.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from triage.core.probe_data import ServerConfigData, StorageData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.registry import ProbeRun, register
from triage.probes.sysfs import read_text

NETWORK_FS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "lustre", "gpfs", "beegfs", "ceph", "fuse.ceph",
    "glusterfs", "fuse.glusterfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "fuse.mountpoint-s3",
    "9p", "wekafs", "fuse.rclone", "afs",
})
EPHEMERAL_FS = frozenset({"tmpfs", "ramfs", "overlay", "aufs"})
MODEL_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
DEFAULT_MAX_READ_BYTES = 256 * 2**20
CHUNK_BYTES = 8 * 2**20


def parse_mounts(text: str) -> list[tuple[str, str]]:
    """[(mount point, fstype)] from /proc/mounts, longest mount point first."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            out.append((parts[1].replace("\\040", " "), parts[2]))
    return sorted(out, key=lambda m: len(m[0]), reverse=True)


def fstype_of(path: str, mounts: list[tuple[str, str]]) -> str | None:
    target = os.path.realpath(path)
    for mount_point, fstype in mounts:
        if target == mount_point or target.startswith(mount_point.rstrip("/") + "/"):
            return fstype
    return None


def hf_cache_dir(env: Mapping[str, str]) -> str:
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    if env.get("HF_HOME"):
        return os.path.join(env["HF_HOME"], "hub")
    home = env.get("HOME") or os.path.expanduser("~")
    return os.path.join(env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "huggingface", "hub")


def resolve_model_dir(model: str | None, cache_dir: str) -> tuple[str | None, bool]:
    """(local directory holding the weights or None, whether `model` is a hub id rather than a path)."""
    if not model:
        return None, False
    if os.path.isdir(model):
        return model, False
    if os.path.isfile(model):
        return os.path.dirname(model) or ".", False
    if model.count("/") == 1 and not model.startswith(("/", ".")):
        snapshots = Path(cache_dir, "models--" + model.replace("/", "--"), "snapshots")
        try:
            versions = sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            versions = []
        return (str(versions[0]) if versions else None), True
    return None, False


def _storage_read_bytes(proc_root: str) -> int | None:
    for who in ("thread-self", "self"):
        text = read_text(proc_root, who, "io")
        if text:
            for line in text.splitlines():
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    return None


def read_speed(model_dir: str, max_bytes: int, budget_s: float, proc_root: str = "/proc"
               ) -> tuple[float | None, int, bool | None]:
    """(GB/s, bytes read, page cache warm?) reading the model files in order, bounded by bytes and time."""
    files = sorted(p for p in Path(model_dir).rglob("*") if p.suffix in MODEL_SUFFIXES and p.is_file())
    if not files:
        return None, 0, None
    io_before = _storage_read_bytes(proc_root)
    done = 0
    t0 = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while done < max_bytes and time.perf_counter() - t0 < budget_s:
                chunk = f.read(min(CHUNK_BYTES, max_bytes - done))
                if not chunk:
                    break
                done += len(chunk)
        if done >= max_bytes or time.perf_counter() - t0 >= budget_s:
            break
    elapsed = time.perf_counter() - t0
    io_after = _storage_read_bytes(proc_root)
    warm = None
    if io_before is not None and io_after is not None and done > 0:
        warm = (io_after - io_before) < 0.1 * done
    gbps = round(done / elapsed / 1e9, 3) if done and elapsed > 0 else None
    return gbps, done, warm


def _in_server_fs(path: str, root: str | None) -> str:
    """`path` as the serving process sees it: under /proc/PID/root when we look from outside its mount
    namespace (a container), else unchanged."""
    if root is None or not os.path.isabs(path):
        return path
    return os.path.join(root, path.lstrip("/"))


def _as_server_sees(path: str, root: str | None) -> str:
    """The inverse of _in_server_fs: a path under /proc/PID/root back to the server's own spelling."""
    if root is not None and path.startswith(root.rstrip("/") + "/"):
        return "/" + os.path.relpath(path, root)
    return path


def _timed_read(model_dir: str | None, max_read_bytes: int, read_budget_s: float, proc_root: str,
                unsupported: list[str]) -> tuple[float | None, int | None, bool | None]:
    """(GB/s, bytes read, page cache warm) of reading the model's files; all None when not measured."""
    if not model_dir:
        return None, None, None
    try:
        return read_speed(model_dir, max_read_bytes, read_budget_s, proc_root)
    except OSError:   # unreadable files: unmeasured, not "0 bytes read"
        unsupported += ["read_gbps", "read_bytes"]
        return None, None, None


def _cache_empty(cache: str | None, root: str | None) -> bool | None:
    """Whether the Hugging Face cache holds no model (None: no cache known, or not ours to list)."""
    if cache is None:
        return None
    try:
        return not any(p.name.startswith("models--") for p in Path(_in_server_fs(cache, root)).iterdir())
    except FileNotFoundError:
        return True    # no cache directory at all: nothing was ever downloaded
    except OSError:
        return None    # there, but not ours to list: unknown, not "empty"


def probe_storage(model: str | None = None, env: Mapping[str, str] | None = None, proc_root: str = "/proc",
                  max_read_bytes: int = DEFAULT_MAX_READ_BYTES, read_budget_s: float = 1.5,
                  pid: int | None = None) -> ProbeResult:
    """`model`: the served model (a path or a hub id). With `pid`, everything is read from the serving
    process's own view: its environment `env` (HF_HOME, HF_HUB_CACHE, ...; None = not readable by us),
    its mount table (/proc/PID/mounts) and its filesystem (/proc/PID/root/...). Without `pid` (a local
    --model PATH, or no server), the model files are timed but no Hugging Face cache is judged: triage's
    own cache says nothing about a server's."""
    start = time.perf_counter()
    root = os.path.join(proc_root, str(pid), "root") if pid is not None else None
    if root is not None and not os.access(root, os.R_OK | os.X_OK):
        root = None                        # not ours to enter: paths as seen from here
    mounts = parse_mounts(read_text(proc_root, str(pid) if pid is not None else "self", "mounts") or "")
    unsupported: list[str] = []
    reasons: list[str] = []
    cache: str | None = None
    if pid is not None and env is not None:
        cache = hf_cache_dir(env)
    elif pid is not None:
        reasons.append(f"the server's environment (/proc/{pid}/environ) is not readable by this user, so its "
                       "Hugging Face cache is unknown")
    model_here = _in_server_fs(model, root) if model else model
    model_dir, is_hub_id = resolve_model_dir(model_here, _in_server_fs(cache, root) if cache else "")
    fstype = fstype_of(_as_server_sees(model_dir, root), mounts) if model_dir and mounts else None
    cache_fstype = fstype_of(cache, mounts) if mounts and cache else None
    if not mounts:
        unsupported += ["model_dir_fstype", "hf_cache_fstype"]
    read_gbps, read_bytes, warm = _timed_read(model_dir, max_read_bytes, read_budget_s, proc_root, unsupported)
    cache_empty = _cache_empty(cache, root)
    if cache_empty is None:
        unsupported.append("hf_cache_empty")
    data = {
        "model": model,
        "model_dir": model_dir,
        "model_dir_fstype": fstype,
        "model_dir_is_network_fs": (fstype in NETWORK_FS) if fstype else None,
        "read_gbps": read_gbps,
        "read_bytes": read_bytes,
        "max_read_bytes": max_read_bytes,
        "page_cache_warm": warm,
        "hf_cache_dir": cache,
        "hf_cache_fstype": cache_fstype,
        "hf_cache_persistent": (cache_fstype not in EPHEMERAL_FS) if cache_fstype else None,
        "hf_cache_empty": cache_empty,
        "hf_home_set": bool(env.get("HF_HOME") or env.get("HF_HUB_CACHE")) if env is not None else None,
        "serves_hub_model_id": is_hub_id,
        "seen_from": "server" if pid is not None else "triage",
        "unsupported_fields": unsupported,
    }
    if pid is not None and env is None:
        return ProbeResult("storage", ProbeStatus.PERMISSION_DENIED, time.perf_counter() - start,
                           "; ".join(reasons), StorageData.of(data))
    return ProbeResult("storage", ProbeStatus.OK, time.perf_counter() - start, None, StorageData.of(data))


@register("storage", phase=3, order=100, timeout_s=lambda run: run.read_budget_s + run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    if run.url and run.pid is None and not run.model:
        # The server's files and HF cache are on another host or in a container: this host's cache says
        # nothing about them (and would make NET002 judge the wrong machine).
        return ProbeResult("storage", ProbeStatus.UNSUPPORTED, 0.0,
                           "the server's process is not visible from here (another host or a container), so its "
                           "model files and cache cannot be read; pass --model PATH to time a local copy")
    config = run.earlier_payload(ServerConfigData)
    model = run.model or (config.model if config is not None else None)
    return probe_storage(model, run.env, run.proc_root, run.max_read_bytes, run.read_budget_s, pid=run.pid)
