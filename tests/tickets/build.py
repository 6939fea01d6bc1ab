"""Builders for what a ticket carries, each laid out as its tool lays it out:

- `nvidia-smi -q` and `-q -x`: the section and field names of NVIDIA's nvidia-smi(1) manual ("GPU ATTRIBUTES";
  https://manpages.ubuntu.com/manpages/focal/en/man1/nvidia-smi.1.html), in the driver-580 layout a user
  posted in ollama/ollama#13552 ("Clocks Event Reasons", "GPU Current Temp");
- plain `nvidia-smi`: its table's two lines per GPU and its process list;
- vLLM's `collect_env`: the keys and `====` headers of `env_info_fmt` (vllm/collect_env.py, claim
  vllm.collect-env-format), `nvidia-smi -L` without UUIDs, `lscpu`, and `nvidia-smi topo -m`;
- a `/metrics` dump: written by prometheus-client itself, under the engine's own metric names;
- an issue body: vLLM's bug template (.github/ISSUE_TEMPLATE/400-bug-report.yml): the environment folded in
  `<details>` with a fenced block, then "Describe the bug" with fenced blocks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from triage.probes.sysfs import parse_cpulist

W = 42   # the key column of `nvidia-smi -q`


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str = "NVIDIA H100 80GB HBM3"
    bus: str = "00000000:18:00.0"
    mem_total_mib: int = 81559
    mem_used_mib: int = 75210
    util_pct: int = 97
    sm_mhz: int = 1980
    sm_max_mhz: int = 1980
    temp_c: int = 62
    power_w: float = 612.0
    power_limit_w: float = 700.0
    gen: int = 5
    gen_max: int = 5
    width: int = 16
    width_max: int = 16
    active_reasons: tuple[str, ...] = ()          # "SW Thermal Slowdown", "HW Slowdown", ...
    processes: tuple[tuple[int, str, int], ...] = ((4242, "python3", 74880),)   # pid, name, MiB
    numa: int = 0
    cpus: str = "0-55,112-167"


_REASONS = ("Idle", "Applications Clocks Setting", "SW Power Cap", "HW Slowdown", "    HW Thermal Slowdown",
            "    HW Power Brake Slowdown", "Sync Boost", "SW Thermal Slowdown", "Display Clock Setting")


def _kv(indent: int, key: str, value: object = None) -> str:
    pad = " " * indent
    return f"{pad}{key}" if value is None else f"{pad}{key:<{W - indent}}: {value}"


def nvidia_smi_q(gpus: list[Gpu], driver: str = "580.95.05", cuda: str = "13.0") -> str:
    out = ["", "==============NVSMI LOG==============", "", _kv(0, "Timestamp", "Sun Jan  4 04:51:39 2026"),
           _kv(0, "Driver Version", driver), _kv(0, "CUDA Version", cuda), "", _kv(0, "Attached GPUs", len(gpus))]
    for g in gpus:
        out += [f"GPU {g.bus}", _kv(4, "Product Name", g.name), _kv(4, "Persistence Mode", "Enabled"),
                _kv(4, "MIG Mode"), _kv(8, "Current", "Disabled"), _kv(8, "Pending", "Disabled"),
                _kv(4, "Minor Number", g.index), _kv(4, "GPU UUID", f"GPU-0000000{g.index}-aaaa-bbbb-cccc-dddddddddddd"),
                _kv(4, "PCI"), _kv(8, "Bus Id", g.bus), _kv(8, "GPU Link Info"), _kv(12, "PCIe Generation"),
                _kv(16, "Max", g.gen_max), _kv(16, "Current", g.gen), _kv(16, "Device Current", g.gen),
                _kv(16, "Device Max", g.gen_max), _kv(16, "Host Max", g.gen_max), _kv(12, "Link Width"),
                _kv(16, "Max", f"{g.width_max}x"), _kv(16, "Current", f"{g.width}x"),
                _kv(8, "Replays Since Reset", 0), _kv(4, "Performance State", "P0"), _kv(4, "Clocks Event Reasons")]
        for reason in _REASONS:
            extra = 4 if reason.startswith(" ") else 0
            state = "Active" if reason.strip() in g.active_reasons else "Not Active"
            out.append(_kv(8 + extra, reason.strip(), state))
        free = g.mem_total_mib - g.mem_used_mib - 328
        out += [_kv(4, "FB Memory Usage"), _kv(8, "Total", f"{g.mem_total_mib} MiB"), _kv(8, "Reserved", "328 MiB"),
                _kv(8, "Used", f"{g.mem_used_mib} MiB"), _kv(8, "Free", f"{free} MiB"),
                _kv(4, "Utilization"), _kv(8, "Gpu", f"{g.util_pct} %"), _kv(8, "Memory", f"{g.util_pct // 2} %"),
                _kv(4, "ECC Mode"), _kv(8, "Current", "Enabled"), _kv(8, "Pending", "Enabled"),
                _kv(4, "ECC Errors"), _kv(8, "Volatile"), _kv(12, "SRAM Correctable", 0),
                _kv(12, "SRAM Uncorrectable Parity", 0), _kv(12, "DRAM Correctable", 0),
                _kv(12, "DRAM Uncorrectable", 0), _kv(4, "Remapped Rows"), _kv(8, "Correctable Error", 0),
                _kv(8, "Uncorrectable Error", 0), _kv(8, "Pending", "No"), _kv(8, "Remapping Failure Occurred", "No"),
                _kv(4, "Temperature"), _kv(8, "GPU Current Temp", f"{g.temp_c} C"),
                _kv(8, "GPU Shutdown Temp", "92 C"), _kv(8, "GPU Slowdown Temp", "89 C"),
                _kv(4, "GPU Power Readings"), _kv(8, "Power Draw", f"{g.power_w:.2f} W"),
                _kv(8, "Current Power Limit", f"{g.power_limit_w:.2f} W"),
                _kv(8, "Default Power Limit", f"{g.power_limit_w:.2f} W"),
                _kv(4, "Clocks"), _kv(8, "Graphics", f"{g.sm_mhz} MHz"), _kv(8, "SM", f"{g.sm_mhz} MHz"),
                _kv(8, "Memory", "2619 MHz"), _kv(4, "Max Clocks"), _kv(8, "Graphics", f"{g.sm_max_mhz} MHz"),
                _kv(8, "SM", f"{g.sm_max_mhz} MHz"), _kv(8, "Memory", "2619 MHz"), _kv(4, "Processes")]
        for pid, name, mib in g.processes:
            out += [_kv(8, "GPU instance ID", "N/A"), _kv(8, "Compute instance ID", "N/A"), _kv(8, "Process ID", pid),
                    _kv(12, "Type", "C"), _kv(12, "Name", name), _kv(12, "Used GPU Memory", f"{mib} MiB")]
        out.append("")
    return "\n".join(out)


def _x(tag: str, value: object) -> str:
    return f"<{tag}>{value}</{tag}>"


def nvidia_smi_xml(gpus: list[Gpu], driver: str = "580.95.05", cuda: str = "13.0") -> str:
    parts = ['<?xml version="1.0" ?>', "<nvidia_smi_log>", _x("driver_version", driver), _x("cuda_version", cuda),
             _x("attached_gpus", len(gpus))]
    for g in gpus:
        reasons = "".join(_x(f"clocks_event_reason_{r.strip().lower().replace(' ', '_')}",
                             "Active" if r.strip() in g.active_reasons else "Not Active") for r in _REASONS)
        procs = "".join(f"<process_info>{_x('pid', pid)}{_x('type', 'C')}{_x('process_name', name)}"
                        f"{_x('used_memory', f'{mib} MiB')}</process_info>" for pid, name, mib in g.processes)
        parts.append(
            f'<gpu id="{g.bus}">' + _x("product_name", g.name) + _x("persistence_mode", "Enabled")
            + _x("minor_number", g.index)
            + "<pci><pci_gpu_link_info><pcie_gen>" + _x("max_link_gen", g.gen_max) + _x("current_link_gen", g.gen)
            + _x("max_device_link_gen", g.gen_max) + "</pcie_gen><link_widths>" + _x("max_link_width", f"{g.width_max}x")
            + _x("current_link_width", f"{g.width}x") + "</link_widths></pci_gpu_link_info>"
            + _x("replay_counter", 0) + "</pci>"
            + f"<clocks_event_reasons>{reasons}</clocks_event_reasons>"
            + "<fb_memory_usage>" + _x("total", f"{g.mem_total_mib} MiB") + _x("used", f"{g.mem_used_mib} MiB")
            + "</fb_memory_usage><utilization>" + _x("gpu_util", f"{g.util_pct} %")
            + _x("memory_util", f"{g.util_pct // 2} %") + "</utilization>"
            + "<temperature>" + _x("gpu_temp", f"{g.temp_c} C") + _x("gpu_temp_slow_threshold", "89 C") + "</temperature>"
            + "<gpu_power_readings>" + _x("power_draw", f"{g.power_w:.2f} W")
            + _x("current_power_limit", f"{g.power_limit_w:.2f} W") + "</gpu_power_readings>"
            + "<clocks>" + _x("sm_clock", f"{g.sm_mhz} MHz") + "</clocks><max_clocks>"
            + _x("sm_clock", f"{g.sm_max_mhz} MHz") + "</max_clocks>" + f"<processes>{procs}</processes></gpu>")
    parts.append("</nvidia_smi_log>")
    return "\n".join(parts)


def nvidia_smi_table(gpus: list[Gpu], driver: str = "580.95.05", cuda: str = "13.0") -> str:
    rule = "+-----------------------------------------------------------------------------------------+"
    out = [rule, f"| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |", rule]
    for g in gpus:
        out.append(f"|   {g.index}  {g.name:<30}  On  |   {g.bus} Off |                    0 |")
        out.append(f"| N/A   {g.temp_c}C    P0            {g.power_w:.0f}W /  {g.power_limit_w:.0f}W |  "
                   f"{g.mem_used_mib}MiB /  {g.mem_total_mib}MiB |     {g.util_pct}%      Default |")
        out.append(rule)
    out += ["", rule, "| Processes:                                                                              |",
            "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |", rule]
    for g in gpus:
        for pid, name, mib in g.processes:
            out.append(f"|    {g.index}   N/A  N/A       {pid}      C   {name:<40}  {mib}MiB |")
    out.append(rule)
    return "\n".join(out)


@dataclass(frozen=True)
class Host:
    vllm: str = "0.7.3"
    torch: str = "2.5.1+cu124"
    cpu_model: str = "Intel(R) Xeon(R) Platinum 8480+"
    nodes: tuple[str, ...] = ("0-55,112-167", "56-111,168-223")
    env: tuple[tuple[str, str], ...] = (("NCCL_CUMEM_ENABLE", "0"), ("CUDA_VISIBLE_DEVICES", "0,1"))
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)


def _header(title: str) -> list[str]:
    return ["==============================", f"{title:^30}".rstrip(), "=============================="]


def collect_env(host: Host) -> str:
    k = 29   # env_info_fmt's key column
    gpus = "\n".join(f"GPU {g.index}: {g.name}" for g in host.gpus)
    cols = "".join(f"\tGPU{g.index}" for g in host.gpus)
    topo = [f"\t{cols}\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for a in host.gpus:
        links = "".join("\t X " if a.index == b.index else "\tNV18" for b in host.gpus)
        topo.append(f"GPU{a.index}{links}\t{a.cpus}\t{a.numa}\t\tN/A")
    num_cpus = sum(len(parse_cpulist(n)) for n in host.nodes)
    lscpu = ["Architecture:                         x86_64", f"CPU(s):                               {num_cpus}",
             f"Model name:                           {host.cpu_model}", f"NUMA node(s):                         {len(host.nodes)}"]
    lscpu += [f"NUMA node{i} CPU(s):                   {cpus}" for i, cpus in enumerate(host.nodes)]
    lines = ["Collecting environment information...", *_header("System Info"),
             f"{'OS':<{k}}: Ubuntu 22.04.4 LTS (x86_64)", f"{'GCC version':<{k}}: (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0",
             "", *_header("PyTorch Info"), f"{'PyTorch version':<{k}}: {host.torch}",
             f"{'Is debug build':<{k}}: False", f"{'CUDA used to build PyTorch':<{k}}: 12.4", "",
             *_header("CUDA / GPU Info"), f"{'Is CUDA available':<{k}}: True",
             f"{'CUDA runtime version':<{k}}: 12.4.131", f"{'GPU models and configuration':<{k}}: ", gpus, "",
             f"{'Nvidia driver version':<{k}}: 550.90.07", "", *_header("CPU Info"), *lscpu, "",
             *_header("Versions of relevant libraries"), f"[pip3] torch=={host.torch}", "",
             *_header("vLLM Info"), f"{'ROCM Version':<{k}}: Could not collect", f"{'vLLM Version':<{k}}: {host.vllm}",
             "vLLM Build Flags:", "  CUDA Archs: Not Set; ROCm: Disabled; Neuron: Disabled", "GPU Topology:",
             "  " + "\n".join(topo), "", *_header("Environment Variables"),
             *(f"{name}={value}" for name, value in host.env)]
    return "\n".join(lines) + "\n"


def vllm_v0_metrics(kv_usage: float, waiting: int, running: int, preemptions: int, ttft_s: tuple[float, ...],
                    model: str = "meta-llama/Llama-3.1-70B-Instruct") -> str:
    """vLLM V0's names (vllm/engine/metrics.py), by prometheus-client, as `curl .../metrics` returns them."""
    reg = CollectorRegistry()
    labels = ["model_name"]
    Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", labels,
          registry=reg).labels(model).set(kv_usage)
    Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
          registry=reg).labels(model).set(waiting)
    Gauge("vllm:num_requests_running", "Number of requests currently running on GPU.", labels,
          registry=reg).labels(model).set(running)
    Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels,
            registry=reg).labels(model).inc(preemptions)
    Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg).labels(model).inc(8.1e6)
    Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
            registry=reg).labels(model).inc(2.3e6)
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                     buckets=(0.02, 0.04, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0), registry=reg).labels(model)
    for v in ttft_s:
        ttft.observe(v)
    # prometheus-client stamps each counter's `_created` series with the time now: pinned, so the file is stable.
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 1.7675e+09", generate_latest(reg).decode())
