"""Tickets: what users attach, built by tests/tickets/build.py, one deployment per ticket. `python -m tests.tickets`
rewrites tests/fixtures/tickets/ (a test checks the files are current).

The planted ticket's causes, each carrying a real case's figures:
- GPU 0 in software thermal slowdown at 81 C while busy (ollama/ollama#13552: 81 C, 903 ms of SW thermal
  slowdown on a driver-580 GPU);
- GPU 1's link at Gen4 x8 where Gen5 x16 is possible (nokyan/resources#512: 16 GT/s x8 on a 32 GT/s x16 slot);
- the KV cache full with requests waiting and preempted (the /metrics dump);
- the server pinned by numactl to NUMA node 0 while both GPUs hang off node 1;
- vLLM 0.7.3, before the V1 engine of 0.8.
The healthy ticket has the same pieces with none of these.
"""
from __future__ import annotations

from pathlib import Path

from tests.incidents.build import fill, vllm0
from tests.tickets.build import (
    Gpu,
    Host,
    collect_env,
    nvidia_smi_q,
    nvidia_smi_table,
    nvidia_smi_xml,
    vllm_v0_metrics,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tickets"
MODEL = "meta-llama/Llama-3.1-70B-Instruct"

PLANTED_GPUS = [
    Gpu(0, temp_c=81, sm_mhz=1410, active_reasons=("SW Thermal Slowdown",), numa=1, cpus="56-111,168-223"),
    Gpu(1, bus="00000000:2A:00.0", util_pct=96, gen=4, width=8, numa=1, cpus="56-111,168-223"),
]
HEALTHY_GPUS = [Gpu(0, util_pct=92), Gpu(1, bus="00000000:2A:00.0", util_pct=91, numa=1, cpus="56-111,168-223")]
SHARED_GPU = [Gpu(0, processes=((4242, "python3", 70012), (5150, "jupyter-lab", 3100)))]


def _log(version: str, kv_pct: float, pending: int) -> str:
    return "\n".join([
        vllm0("01-04 04:40:02", "api_server.py:712") + f"vLLM API server version {version}",
        vllm0("01-04 04:51:30", "metrics.py:455") + fill("vllm.log-stats-0.6", 1210.4, 980.2, 48, 0, pending,
                                                           kv_pct, 0.0),
    ])


def _command(numactl: bool) -> str:
    bind = "numactl --cpunodebind=0 --membind=0 " if numactl else ""
    return (f"{bind}vllm serve {MODEL} \\\n    --tensor-parallel-size 2 --max-model-len 16384 \\\n"
            "    --gpu-memory-utilization 0.92 --api-key sk-live-abcdef123456")


def _body(env: str, command: str, log: str, metrics: str, smi: str, bug: str) -> str:
    """vLLM's bug template: the environment folded in <details>, then the bug with its blocks."""
    return "\n".join([
        "### Your current environment", "", "<details>",
        "<summary>The output of <code>python collect_env.py</code></summary>", "", "```text", env.rstrip(), "```",
        "", "</details>", "", "### 🐛 Describe the bug", "", bug, "", "I start the server with:", "", "```bash",
        command, "```", "", "The server log:", "", "```", log, "```", "", "`curl localhost:8000/metrics`:", "",
        "<details>", "<summary>metrics</summary>", "", "```", metrics.rstrip(), "```", "", "</details>", "",
        "`nvidia-smi -q`:", "", "```", smi.rstrip(), "```", "",
        "### Before submitting a new issue...", "", "- [x] Make sure you already searched for relevant issues.", ""])


def tickets() -> dict[str, str]:
    """{file name: text} of every ticket fixture."""
    planted_host = Host(vllm="0.7.3", gpus=tuple(PLANTED_GPUS))
    healthy_host = Host(vllm="0.7.3", gpus=tuple(HEALTHY_GPUS), nodes=("0-55,112-167", "56-111,168-223"))
    planted_metrics = vllm_v0_metrics(0.99, 23, 48, 312, (0.8, 1.9, 3.2, 4.4, 6.1, 2.2))
    healthy_metrics = vllm_v0_metrics(0.41, 0, 12, 0, (0.05, 0.08, 0.09, 0.12))
    return {
        "planted_issue.md": _body(collect_env(planted_host), _command(True), _log("0.7.3", 99.0, 23),
                                  planted_metrics, nvidia_smi_q(PLANTED_GPUS),
                                  "TTFT went from 0.3 s to 4 s after we moved to the new nodes."),
        "healthy_issue.md": _body(collect_env(healthy_host), _command(False), _log("0.7.3", 41.0, 0),
                                  healthy_metrics, nvidia_smi_q(HEALTHY_GPUS),
                                  "Is this throughput expected for a 70B model on two H100s?"),
        "throttled_nvidia_smi_q.txt": nvidia_smi_q(PLANTED_GPUS),
        "throttled_nvidia_smi_q.xml": nvidia_smi_xml(PLANTED_GPUS),
        "shared_nvidia_smi.txt": nvidia_smi_table(SHARED_GPU),
        "collect_env_0.7.3.txt": collect_env(planted_host),
        "kv_saturated_metrics.txt": planted_metrics,
        "launch_command.sh": _command(True) + "\n",
    }


def write_all() -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, text in tickets().items():
        (FIXTURES / name).write_text(text, encoding="utf-8")
    return len(tickets())
