"""`nvidia-smi -q` (text), `nvidia-smi -q -x` (XML) and plain `nvidia-smi` (the table) -> the `gpu` payload.

The field names are those of NVIDIA's documented output (the nvidia-smi(1) manual, "GPU ATTRIBUTES"): the text
form indents `Name : value` under section headers, the XML form nests lower-case tags. Both are read into one
tree of nodes keyed by a normalised name (`FB Memory Usage` and `<fb_memory_usage>` are both `fb_memory_usage`),
and one extractor reads either; where the two spell a field differently, both spellings are listed. The table
gives what it shows: each GPU's name, memory, utilisation and its processes.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from triage.core.errors import ReportError

MIB = 1024 ** 2
# The text form's names of the clock-event reasons -> NVML's (probes/nvml.py CLOCK_EVENT_BITS).
_REASONS = {"idle": "gpu_idle", "gpu_idle": "gpu_idle", "applications_clocks_setting": "applications_clocks_setting",
            "sw_power_cap": "sw_power_cap", "hw_slowdown": "hw_slowdown", "sync_boost": "sync_boost",
            "sw_thermal_slowdown": "sw_thermal_slowdown", "hw_thermal_slowdown": "hw_thermal_slowdown",
            "hw_power_brake_slowdown": "hw_power_brake_slowdown", "display_clock_setting": "display_clock_setting"}


@dataclass
class Node:
    key: str
    value: str | None = None
    children: list[Node] = field(default_factory=list)

    def get(self, *path: str | tuple[str, ...]) -> Node | None:
        """The first node down `path`; each step a name or a tuple of alternative names."""
        node: Node | None = self
        for step in path:
            names = (step,) if isinstance(step, str) else step
            node = next((c for c in node.children if c.key in names), None) if node else None
        return node

    def text(self, *path: str | tuple[str, ...]) -> str | None:
        node = self.get(*path)
        return node.value if node is not None else None


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def parse_q_text(text: str) -> Node:
    """`nvidia-smi -q` as a tree: a line is `Name : value` or a section header, nested by its indentation."""
    root = Node("root")
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in text.splitlines():
        if not raw.strip() or raw.strip().startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" \t"))
        name, sep, value = raw.strip().partition(":")
        if raw.strip().startswith("GPU ") and re.match(r"GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", raw.strip()):
            name, sep, value = "gpu", ":", raw.strip()[4:]
        node = Node(_key(name), value.strip() if sep else None)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def parse_q_xml(text: str) -> Node:
    """`nvidia-smi -q -x` as the same tree. A document that declares entities is refused (no expansion)."""
    if re.search(r"<!ENTITY", text[:5000], re.I):
        raise ReportError("nvidia-smi XML that declares entities is not read")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ReportError(f"not well-formed nvidia-smi XML ({e})") from None

    def convert(el: ET.Element) -> Node:
        key = "gpu" if el.tag == "gpu" else _key(re.sub(r"^clocks_(event|throttle)_reason_", "", el.tag))
        value = el.attrib.get("id") if el.tag == "gpu" else (el.text or "").strip() or None
        return Node(key, value, [convert(c) for c in el])

    return convert(root)


def _number(text: str | None) -> float | None:
    m = re.search(r"-?\d+(\.\d+)?", text or "")
    return float(m.group(0)) if m and "N/A" not in (text or "") else None


def _int(text: str | None) -> int | None:
    n = _number(text)
    return int(n) if n is not None else None


def _mib(text: str | None) -> int | None:
    n = _number(text)
    return int(n * MIB) if n is not None else None


def _on(text: str | None) -> bool | None:
    t = (text or "").strip().lower()
    return True if t in ("enabled", "yes", "active") else False if t in ("disabled", "no", "not active") else None


_REASON_SECTIONS = ("clocks_event_reasons", "clocks_throttle_reasons", "clocks_reasons")


def _reasons(gpu: Node) -> tuple[str, ...] | None:
    section = gpu.get(_REASON_SECTIONS)
    if section is None:
        return None
    active: list[str] = []

    def walk(node: Node) -> None:
        for c in node.children:
            if c.key in _REASONS and _on(c.value):
                active.append(_REASONS[c.key])
            walk(c)
    walk(section)
    return tuple(dict.fromkeys(active))


def _ecc_volatile(gpu: Node, kind: str) -> int | None:
    volatile = gpu.get("ecc_errors", "volatile")
    if volatile is None:
        return None
    def counts(key: str) -> bool:   # "sram_uncorrectable_sec_ded" is uncorrectable, "dram_correctable" is not
        return "uncorrectable" in key if kind == "uncorrectable" else "correctable" in key and "uncorrectable" not in key
    values = [_int(c.value) for c in volatile.children if counts(c.key)]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _processes(gpu: Node) -> tuple[dict[str, Any], ...] | None:
    section = gpu.get("processes")
    if section is None:
        return None
    out = []
    for p in section.children:
        if p.key in ("process_id", "pid"):                      # the text form: the rest hang under the pid
            info = p
            pid = _int(p.value)
        elif p.key == "process_info":                          # the XML form
            info = p
            pid = _int(p.text("pid"))
        else:
            continue
        out.append({"pid": pid, "name": info.text(("name", "process_name")),
                    "used_memory_bytes": _mib(info.text(("used_gpu_memory", "used_memory")))})
    return tuple(out)


def _device(index: int, gpu: Node) -> dict[str, Any]:
    link = gpu.get("pci", ("gpu_link_info", "pci_gpu_link_info"))
    gen = link.get(("pcie_generation", "pcie_gen")) if link else None
    width = link.get(("link_width", "link_widths")) if link else None
    util = _number(gpu.text("utilization", ("gpu", "gpu_util")))
    power = gpu.get(("gpu_power_readings", "power_readings"))
    temp = gpu.get("temperature")
    remap = gpu.get("remapped_rows")
    retired = gpu.get("retired_pages")
    return {
        "index": _int(gpu.text("minor_number")) if gpu.text("minor_number") not in (None, "N/A") else index,
        "name": gpu.text("product_name"), "uuid": gpu.text(("gpu_uuid", "uuid")), "pci_bus_id": gpu.value,
        "memory_total_bytes": _mib(gpu.text("fb_memory_usage", "total")),
        "memory_used_bytes": _mib(gpu.text("fb_memory_usage", "used")),
        "memory_reserved_bytes": _mib(gpu.text("fb_memory_usage", "reserved")),
        "memory_free_bytes": _mib(gpu.text("fb_memory_usage", "free")),
        "utilization_gpu_pct": util,
        "utilization_memory_pct": _number(gpu.text("utilization", ("memory", "memory_util"))),
        "sm_clock_mhz": _number(gpu.text("clocks", ("sm", "sm_clock"))),
        "sm_clock_max_mhz": _number(gpu.text("max_clocks", ("sm", "sm_clock"))),
        "mem_clock_mhz": _number(gpu.text("clocks", ("memory", "mem_clock"))),
        "mem_clock_max_mhz": _number(gpu.text("max_clocks", ("memory", "mem_clock"))),
        "clock_event_reasons": _reasons(gpu),
        "clock_event_reasons_source": "nvidia-smi" if gpu.get(_REASON_SECTIONS) else None,
        "power_usage_w": _number(power.text(("power_draw", "instantaneous_power_draw", "instant_power_draw",
                                             "average_power_draw"))) if power else None,
        "power_limit_enforced_w": _number(power.text(("current_power_limit", "enforced_power_limit",
                                                      "power_limit"))) if power else None,
        "power_limit_default_w": _number(power.text("default_power_limit")) if power else None,
        "temperature_c": _number(temp.text(("gpu_current_temp", "gpu_temp"))) if temp else None,
        "temperature_slowdown_c": _number(temp.text(("gpu_slowdown_temp", "gpu_temp_slow_threshold"))) if temp else None,
        "pcie_link_gen_current": _int(gen.text(("current", "current_link_gen"))) if gen else None,
        "pcie_link_gen_max": _int(gen.text(("max", "max_link_gen"))) if gen else None,
        "pcie_link_gen_gpu_max": _int(gen.text(("device_max", "max_device_link_gen"))) if gen else None,
        "pcie_link_width_current": _int(width.text(("current", "current_link_width"))) if width else None,
        "pcie_link_width_max": _int(width.text(("max", "max_link_width"))) if width else None,
        "pcie_read_utilization_gpu_pct": util if gen is not None else None,
        "pcie_replay_count": _int(gpu.text("pci", ("replays_since_reset", "replay_counter"))),
        "ecc_mode_enabled": _on(gpu.text("ecc_mode", ("current", "current_ecc"))),
        "ecc_corrected_volatile": _ecc_volatile(gpu, "correctable") if gpu.get("ecc_errors") else None,
        "ecc_uncorrected_volatile": _ecc_volatile(gpu, "uncorrectable") if gpu.get("ecc_errors") else None,
        "remapped_rows_correctable": _int(remap.text(("correctable_error", "remapped_row_corr"))) if remap else None,
        "remapped_rows_uncorrectable": _int(remap.text(("uncorrectable_error", "remapped_row_unc"))) if remap else None,
        "remapped_rows_pending": _on(remap.text(("pending", "remapped_row_pending"))) if remap else None,
        "remapped_rows_failure": _on(remap.text(("remapping_failure_occurred", "remapped_row_failure"))) if remap else None,
        "retired_pages_sbe": _int(retired.text(("single_bit_ecc", "multiple_single_bit_retirement"))) if retired else None,
        "retired_pages_dbe": _int(retired.text(("double_bit_ecc", "double_bit_retirement"))) if retired else None,
        "persistence_mode_enabled": _on(gpu.text("persistence_mode")),
        "mig_mode_enabled": _on(gpu.text("mig_mode", ("current", "current_mig"))),
        "compute_processes": _processes(gpu),
    }


def read_q(tree: Node) -> dict[str, Any]:
    """The `gpu` payload from either -q form's tree."""
    top = tree.get("nvidia_smi_log") or tree
    gpus = [c for c in top.children if c.key == "gpu"]
    if not gpus:
        raise ReportError("no GPU section in this nvidia-smi output")
    devices = [_device(i, g) for i, g in enumerate(gpus)]
    return {"driver_version": top.text("driver_version"), "cuda_driver_version": top.text("cuda_version"),
            "num_gpus": len(devices), "gpus": [{k: v for k, v in d.items() if v is not None} for d in devices]}


# The table: `|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |                    0 |`, then
# `| N/A   84C    P0            690W /  700W |  75000MiB /  81559MiB |     98%      Default |`.
_TABLE_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s{2,}(On|Off)\s+\|\s+([0-9A-Fa-f:.]+)")
_TABLE_USE = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB\s*\|\s*(\d+)%")
_TABLE_TEMP = re.compile(r"^\|\s*(?:\S+)\s+(\d+)C\s+P\d+\s+(?:(\d+)W\s*/\s*(\d+)W)?")
_TABLE_PROC = re.compile(r"^\|\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+\w+\s+(.+?)\s+(\d+)MiB\s*\|")


def _table_gpu(m: re.Match[str], nxt: str) -> dict[str, Any]:
    """One GPU's two table lines: the name row `m` and the usage row after it."""
    gpu: dict[str, Any] = {"index": int(m.group(1)), "name": m.group(2).strip(), "pci_bus_id": m.group(4),
                           "persistence_mode_enabled": m.group(3) == "On"}
    use, temp = _TABLE_USE.search(nxt), _TABLE_TEMP.match(nxt)
    if use:
        gpu.update(memory_used_bytes=int(use.group(1)) * MIB, memory_total_bytes=int(use.group(2)) * MIB,
                   utilization_gpu_pct=float(use.group(3)))
    if temp:
        gpu["temperature_c"] = float(temp.group(1))
        if temp.group(2):
            gpu.update(power_usage_w=float(temp.group(2)), power_limit_enforced_w=float(temp.group(3)))
    return gpu


def read_table(text: str) -> dict[str, Any]:
    """Plain `nvidia-smi`: GPUs, memory, utilisation, temperature, power and processes."""
    lines = text.splitlines()
    split = next((i for i, ln in enumerate(lines) if "Processes:" in ln), len(lines))
    gpus = [_table_gpu(m, lines[i + 1] if i + 1 < len(lines) else "")
            for i, line in enumerate(lines[:split]) if (m := _TABLE_GPU.match(line))]
    procs: dict[int, list[dict[str, Any]]] = {}
    for p in (m for line in lines[split:] if (m := _TABLE_PROC.match(line))):
        procs.setdefault(int(p.group(1)), []).append(
            {"pid": int(p.group(2)), "name": p.group(3).strip(), "used_memory_bytes": int(p.group(4)) * MIB})
    in_procs = split < len(lines)
    if not gpus:
        raise ReportError("no GPU row in this nvidia-smi table")
    for g in gpus:
        if in_procs:
            g["compute_processes"] = procs.get(g["index"], [])
    version = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return {"driver_version": version.group(1) if version else None,
            "cuda_driver_version": cuda.group(1) if cuda else None, "num_gpus": len(gpus), "gpus": gpus}
