"""vLLM's `collect_env` output (what its bug template asks for) -> versions, GPUs, their topology, the CPU's NUMA
nodes and the environment it printed.

The layout is vLLM's `env_info_fmt` (vllm/collect_env.py, claim vllm.collect-env-format): `Key : value` lines
under `====` section headers; `GPU models and configuration` is `nvidia-smi -L` without UUIDs; `CPU Info` is
`lscpu`; `GPU Topology` is `nvidia-smi topo -m`; `Environment Variables` is `NAME=value` lines.
"""
from __future__ import annotations

import re
from typing import Any

from triage.core.redact import redact_env
from triage.probes.server_process import DEBUG_ENV
from triage.probes.sysfs import parse_cpulist

_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9 ./()_-]*?)\s*:\s*(.*)$")
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?)\s*$")
_LINKS = {"SYS": "system", "NODE": "node", "PHB": "hostbridge", "PXB": "multiple", "PIX": "single"}


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _KEY.match(line.strip())
        if m and m.group(1) not in out:
            out[m.group(1).strip()] = m.group(2).strip()
    return out


def _section(text: str, title: str) -> str:
    """The lines under a `====` header named `title`, up to the next header."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == title and i > 0 and lines[i - 1].strip().startswith("==="):
            body = []
            for nxt in lines[i + 2:]:
                if nxt.strip().startswith("==="):
                    break
                body.append(nxt)
            return "\n".join(body)
    return ""


def _topology(text: str) -> tuple[dict[int, int], list[dict[str, Any]], dict[int, tuple[int, ...]]]:
    """`nvidia-smi topo -m`: {gpu: NUMA node}, the GPU pairs and {gpu: its CPU affinity}."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    header = next((ln for ln in lines if "CPU Affinity" in ln), None)
    if header is None:
        return {}, [], {}
    columns = [c for c in re.split(r"\s+", header.split("CPU Affinity")[0].strip()) if c]
    numa: dict[int, int] = {}
    affinity: dict[int, tuple[int, ...]] = {}
    pairs = []
    for line in lines[lines.index(header) + 1:]:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        a = int(cells[0][3:])
        links, rest = cells[1:1 + len(columns)], cells[1 + len(columns):]
        for col, link in zip(columns, links, strict=False):
            if re.fullmatch(r"GPU\d+", col) and int(col[3:]) > a:
                pairs.append({"gpu_a": a, "gpu_b": int(col[3:]), "nvlink": link.startswith("NV"),
                              "common_ancestor": _LINKS.get(link)})
        if rest:
            cpus = parse_cpulist(rest[0]) if re.fullmatch(r"[\d,-]+", rest[0]) else None
            if cpus:
                affinity[a] = tuple(cpus)
        if len(rest) > 1 and rest[1].isdigit():
            numa[a] = int(rest[1])
    return numa, pairs, affinity


def _numa_nodes(cpu_info: str) -> list[dict[str, Any]]:
    nodes = []
    for m in re.finditer(r"NUMA node(\d+) CPU\(s\):\s*([\d,-]+)", cpu_info):
        nodes.append({"node": int(m.group(1)), "cpus": tuple(parse_cpulist(m.group(2)))})
    return nodes


def _env(text: str) -> dict[str, str]:
    pairs = dict(m.groups() for m in re.finditer(r"^([A-Z][A-Z0-9_]*)=(.*)$", text, re.M))
    return redact_env(pairs)


def read(text: str) -> dict[str, Any]:
    """{"engine_version", "torch_version", "cuda_runtime", "gpu": {...}, "cpu": {...}, "env": {...}}; a field the
    output lacks (or says `Could not collect` for) is absent."""
    fields = {k: v for k, v in _fields(text).items() if v and v != "Could not collect"}
    gpu_models = _section(text, "CUDA / GPU Info") or text
    names = {int(m.group(1)): m.group(2) for ln in gpu_models.splitlines() if (m := _GPU_LINE.match(ln.strip()))}
    topo_text = text.split("GPU Topology:", 1)[1] if "GPU Topology:" in text else ""
    topo_text = re.split(r"\n=+\n", topo_text)[0]
    numa, pairs, affinity = _topology(topo_text)
    gpus = [{"index": i, "name": names.get(i), "numa_node": numa.get(i),
             "numa_node_source": "nvidia-smi topo -m" if i in numa else None}
            for i in sorted(set(names) | set(numa))]
    cpu_info = _section(text, "CPU Info")
    cpu_fields = _fields(cpu_info)
    version = fields.get("vLLM Version", "")
    m = re.search(r"\d+\.\d+(\.\d+)?(\.post\d+|rc\d+)?", version)
    env_all = _env(_section(text, "Environment Variables"))
    return {
        "engine_version": m.group(0) if m else None,
        "torch_version": fields.get("PyTorch version"),
        "gpu": {"driver_version": fields.get("Nvidia driver version"),
                "num_gpus": len(gpus) or None,
                "gpus": [{k: v for k, v in g.items() if v is not None} for g in gpus],
                "topology": pairs},
        "gpu_cpu_affinity": affinity,
        "cpu": {"model": cpu_fields.get("Model name"),
                "num_logical_cpus": int(cpu_fields["CPU(s)"]) if cpu_fields.get("CPU(s)", "").isdigit() else None,
                "numa_nodes": _numa_nodes(cpu_info) or None},
        "env": {k: v for k, v in env_all.items() if k in DEBUG_ENV},
    }
