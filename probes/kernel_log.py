"""The `kernel_log` probe: NVIDIA Xid events (`NVRM: Xid (PCI:...): N, ...`) from dmesg or /dev/kmsg.

Reading the kernel ring buffer needs privileges on most distributions (kernel.dmesg_restrict=1);
then the status is `permission_denied` and says how to read it. Keys: docs/SNAPSHOT.md.
"""
from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable

from triage.core.probe_data import KernelLogData
from triage.core.redact import redact_text
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.core.xid import XID_MEANINGS
from triage.probes.registry import ProbeRun, register

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)")
_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")   # dmesg's "[ 1234.567890]": seconds since boot
MAX_LINES = 200_000
MAX_EVENTS = 100


def parse_xids(lines: list[str], uptime_s: float | None = None) -> list[dict]:
    """Xid events; `age_s` (seconds before now) when the line has a boot-time stamp and `uptime_s`
    (now, in seconds since boot) is known, else None."""
    events = []
    for line in lines:
        m = _XID.search(line)
        if m:
            xid = int(m.group(2))
            stamp = _STAMP.match(line.strip())
            age = None
            if stamp and uptime_s is not None and uptime_s >= float(stamp.group(1)):
                age = round(uptime_s - float(stamp.group(1)), 1)
            events.append({"xid": xid, "pci_bus_id": m.group(1), "meaning": XID_MEANINGS.get(xid),
                           "age_s": age, "line": redact_text(line.strip())[:300]})
    return events


def _uptime_s(proc_root: str) -> float | None:
    try:
        with open(os.path.join(proc_root, "uptime"), encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_kmsg(path: str, max_lines: int) -> list[str]:
    """Every record now in the ring buffer, without blocking for new ones."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    lines: list[str] = []
    try:
        while len(lines) < max_lines:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:  # a record was overwritten while reading: go on
                    continue
                raise
            if not record:
                break
            text = record.decode(errors="replace")
            prefix, sep, message = text.partition(";")
            fields = prefix.split(",")   # "priority,sequence,microseconds since boot,flags"
            if sep and len(fields) > 2 and fields[2].isdigit():
                lines.append(f"[{int(fields[2]) / 1e6:.6f}] {message}")   # dmesg's own stamp format
            else:
                lines.append(message if sep else text)
    finally:
        os.close(fd)
    return lines


def _run_dmesg() -> tuple[list[str] | None, str | None]:
    try:
        proc = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5, check=False)
    except FileNotFoundError:
        return None, "dmesg is not installed"
    except subprocess.TimeoutExpired:
        return None, "dmesg did not answer within 5 s"
    if proc.returncode != 0:
        return None, (proc.stderr.strip() or f"dmesg exited with {proc.returncode}")
    return proc.stdout.splitlines(), None


def probe_kernel_log(path: str | None = None, kmsg_path: str = "/dev/kmsg",
                     run_dmesg: Callable[[], tuple[list[str] | None, str | None]] = _run_dmesg,
                     max_lines: int = MAX_LINES, proc_root: str = "/proc") -> ProbeResult:
    """Read `path` when given (a saved dmesg), else dmesg, else /dev/kmsg. Events from the live log get
    their age from /proc/uptime; a saved file may come from another boot, so its events get none."""
    start = time.perf_counter()

    def done(status: ProbeStatus, reason: str | None, data: dict | None = None) -> ProbeResult:
        return ProbeResult("kernel_log", status, time.perf_counter() - start, reason, KernelLogData.of(data))

    reasons = []
    lines: list[str] | None = None
    source = None
    if path is not None:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()[-max_lines:]
            source = path
        except PermissionError:
            return done(ProbeStatus.PERMISSION_DENIED, f"cannot read {path}: permission denied")
        except OSError as e:
            return done(ProbeStatus.ERROR, f"cannot read {path}: {e.strerror or e}")
    else:
        lines, why = run_dmesg()
        if lines is not None:
            source = "dmesg"
            lines = lines[-max_lines:]
        else:
            reasons.append(f"dmesg: {why}")
            try:
                lines = _read_kmsg(kmsg_path, max_lines)
                source = kmsg_path
            except PermissionError:
                reasons.append(f"{kmsg_path}: permission denied")
            except OSError as e:
                reasons.append(f"{kmsg_path}: {e.strerror or e}")
    if lines is None:
        denied = any("permission" in r.lower() or "not permitted" in r.lower() for r in reasons)
        reason = ("the kernel log is not readable by this user (" + "; ".join(reasons) + "). "
                  "Run as root, or save `sudo dmesg` to a file and pass it with --kernel-log FILE")
        return done(ProbeStatus.PERMISSION_DENIED if denied else ProbeStatus.UNSUPPORTED, reason)
    events = parse_xids(lines, None if path is not None else _uptime_s(proc_root))
    ages = [e["age_s"] for e in events if e["age_s"] is not None]
    data = {
        "source": source,
        "num_lines_read": len(lines),
        "num_xid_events": len(events),
        "xid_counts": {str(k): v for k, v in sorted(Counter(e["xid"] for e in events).items())},
        "xid_events": events[-MAX_EVENTS:],
        "newest_xid_age_s": min(ages) if ages else None,
    }
    return done(ProbeStatus.OK, None, data)


@register("kernel_log", phase=2, order=80, timeout_s=lambda run: run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_kernel_log(run.kernel_log_path, proc_root=run.proc_root)
