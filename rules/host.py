"""Host rules: CPU, memory, storage and network (probes: cpu, server_process, memory, storage, network)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data import (
    CpuData,
    HistogramWindow,
    LogsData,
    MemoryData,
    NetworkData,
    ServerConfigData,
    ServerMetricsData,
    ServerProcessData,
    StorageData,
)
from triage.core.report import Certainty, Fix, Severity
from triage.rules.base import Hit, MissingInput, RuleDoc
from triage.rules.context import Context, level_label
from triage.rules.engines import engine_flags
from triage.rules.fmt import ms
from triage.rules.registry import rule


# ------------------------------------------------------------------------------------------------
@rule("CPU001", "numa-misaligned", Severity.MEDIUM, ("server_process", "gpu"), RuleDoc(
    what="The serving process's CPU affinity or its memory lies outside the NUMA node the GPU hangs off.",
    why="Every host-device copy and every CPU-side step (tokenizing, scheduling, sampling glue) then crosses "
        "the socket interconnect: higher latency, lower bandwidth, and jitter in TTFT.",
    example="gpu.gpus[0].numa_node = 1, server_process.affinity_numa_nodes = [0], "
            "server_process.memory_numa_nodes = [0]",
    fix="Bind the server to the GPU's node: `numactl --cpunodebind=N --membind=N vllm serve ...`.",
    references=("seed 003 CPU layer (check NUMA affinity, bind vLLM to the correct node)", "nvidia-smi topo -m"),
))
def cpu001(ctx: Context) -> Hit | None:
    nodes = {g.numa_node for g in ctx.serving_gpus()}
    nodes = {n for n in nodes if n is not None and n >= 0}
    if not nodes:
        raise MissingInput("gpu.numa_node was not measured (or the host has no NUMA information)")
    cpu = ctx.snapshot.payload(CpuData) or {}
    if cpu.numa_nodes is not None and len(cpu.numa_nodes) <= 1:
        return None  # one NUMA node: nothing can be misaligned
    affinity = ctx.measured(ctx.need(ServerProcessData).affinity_numa_nodes, "server_process.affinity_numa_nodes")
    memory = ctx.seen(ServerProcessData).memory_numa_nodes
    evidence: dict[str, Any] = {"gpu.numa_node": sorted(nodes)}
    problems = []
    if not set(affinity) & nodes:
        evidence["server_process.affinity_numa_nodes"] = affinity
        problems.append("its CPUs are all on another NUMA node")
    if memory is not None and memory and not set(memory) & nodes:
        evidence["server_process.memory_numa_nodes"] = memory
        problems.append("its memory sits on another NUMA node")
    if not problems:
        return None
    node = min(nodes)
    return Hit(
        title="The server runs on a different NUMA node than its GPU",
        message=f"The GPU is on NUMA node {node} but {' and '.join(problems)}.",
        evidence=evidence, certainty=Certainty.CONFIRMED, impact=0.3,
        fix=Fix(f"Start the server bound to node {node}.",
                (f"numactl --cpunodebind={node} --membind={node} <your server command>",)),
    )


# ------------------------------------------------------------------------------------------------
_SLOW_GOVERNORS = frozenset({"powersave", "ondemand", "conservative"})


@rule("CPU002", "cpu-governor-not-performance", Severity.MEDIUM, ("cpu",), RuleDoc(
    what="The CPU frequency scaling governor is powersave, ondemand or conservative on a serving host.",
    why="The front end (HTTP, tokenizer, scheduler) runs in bursts; a governor that ramps clocks slowly adds "
        "to every request's CPU path and inflates client-side TTFT. (On intel_pstate with HWP, 'powersave' "
        "is less harmful than the name says, but 'performance' is still the serving choice.)",
    example="cpu.governor = 'powersave', cpu.governors = {powersave: 64}",
    fix="`sudo cpupower frequency-set -g performance` (persist it with tuned or your provisioning).",
    references=("seed 003 CPU layer", "cpupower(1)"),
))
def cpu002(ctx: Context) -> Hit | None:
    governors = ctx.seen(CpuData).governors or {}
    main = ctx.seen(CpuData).governor
    if main is None and not governors:
        raise MissingInput("cpu.governor was not measured (no cpufreq in /sys, e.g. in many VMs)")
    slow = {g: n for g, n in governors.items() if g in _SLOW_GOVERNORS}
    if main in _SLOW_GOVERNORS and main not in slow:
        slow[main] = None
    if not slow:
        return None
    return Hit(
        title="The CPU frequency governor is not 'performance'",
        message=f"The CPU runs under the {', '.join(sorted(slow))} governor, which ramps clocks slowly for the "
                "bursty front-end work.",
        evidence={"cpu.governor": main, "cpu.governors": governors or None},
        certainty=Certainty.CONFIRMED, impact=0.15,
        fix=Fix("Switch the governor to performance.", ("sudo cpupower frequency-set -g performance",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("CPU003", "single-core-saturated", Severity.HIGH, ("server_process", "gpu"), RuleDoc(
    what="One thread in the server's process tree is at >= 95% of a core while the serving GPU is below 60% "
         "busy: the front end (tokenizer, GIL-bound Python, detokenizer) is the bottleneck.",
    why="The API server and scheduler are single-threaded Python in most engines; when that thread is "
        "pegged, requests queue in front of an idle GPU.",
    example="server_process.max_thread_cpu_pct = 99, gpu.gpus[0].utilization_gpu_pct = 35",
    fix="Use the fast tokenizer, scale the front end (vLLM `--api-server-count N`, ≥ 0.10), move pre/post "
        "processing out of the server.",
    references=("seed 003 CPU layer (mpstat -P ALL: single-thread bottlenecks)", "seed 002 lessons (profile first)"),
), thresholds=("CPU003.thread_busy_pct", "CPU003.gpu_waiting_util_pct"))
def cpu003(ctx: Context) -> Hit | None:
    thread = ctx.measured(ctx.need(ServerProcessData).max_thread_cpu_pct, "server_process.max_thread_cpu_pct")
    utils = [g.utilization_gpu_pct for g in ctx.serving_gpus() if g.utilization_gpu_pct is not None]
    if not utils:
        raise MissingInput("gpu.utilization_gpu_pct was not measured")
    if thread < ctx.th("CPU003.thread_busy_pct") or max(utils) >= ctx.th("CPU003.gpu_waiting_util_pct"):
        return None
    engine = ctx.engine()
    knobs: dict[str, object] = {"tokenizer_mode_auto": None}
    v = engine.version_tuple
    if engine.name == "vllm" and v is not None and v >= (0, 10, 0):
        current = ctx.seen(ServerConfigData).api_server_count or 1
        knobs["api_server_count"] = max(2, int(current) * 2)
    cmds, note = engine_flags(knobs, engine.name)
    return Hit(
        title="A pegged CPU thread starves the GPU",
        message=f"One server thread runs at {thread:.0f}% of a core while the GPU is at {max(utils):.0f}%: the "
                "CPU-side front end, not the GPU, sets the pace.",
        evidence={"server_process.max_thread_cpu_pct": thread, "gpu.utilization_gpu_pct_max": max(utils)},
        certainty=Certainty.LIKELY, impact=0.6,
        fix=Fix("Make sure the fast (Rust) tokenizer is used, run more API-server processes where the engine "
                "supports it, and move heavy pre/post-processing out of the server process." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("CPU004", "slow-tokenizer", Severity.MEDIUM, ("logs",), RuleDoc(
    what="The server log says 'Using a slow tokenizer' (the model has no fast tokenizer.json, or the slow one "
         "was forced).",
    why="The Python tokenizer is 10-100x slower than the Rust one and holds the GIL: with long prompts it "
        "adds to every TTFT and caps the request rate of the front end.",
    example="logs.slow_tokenizer = true",
    fix="Provide a fast tokenizer (tokenizer.json; convert with transformers' AutoTokenizer(use_fast=True) "
        "and save_pretrained) and use `--tokenizer-mode auto`.",
    references=("vLLM log line 'Using a slow tokenizer. This might cause a significant slowdown.'",),
))
def cpu004(ctx: Context) -> Hit | None:
    slow = ctx.measured(ctx.need(LogsData).slow_tokenizer, "logs.slow_tokenizer")
    if not slow:
        return None
    cmds, note = engine_flags({"tokenizer_mode_auto": None}, ctx.engine().name)
    return Hit(
        title="The server uses a slow (Python) tokenizer",
        message="The server log reports a slow tokenizer: tokenization runs in Python under the GIL.",
        evidence={"logs.slow_tokenizer": True, "logs.path": ctx.seen(LogsData).path},
        certainty=Certainty.CONFIRMED, impact=0.3,
        fix=Fix("Ship a fast tokenizer.json with the model (load it with AutoTokenizer(use_fast=True) and "
                "save_pretrained), and do not force the slow mode." + note, cmds),
    )


# ------------------------------------------------------------------------------------------------
@rule("MEM001", "swap-active", Severity.HIGH, ("memory",), RuleDoc(
    what="Swap is enabled and pages moved in or out of it during the window.",
    why="A server whose pages (pinned buffers' neighbours, Python heaps, the tokenizer) are swapped stalls "
        "for milliseconds per fault: random, large latency spikes.",
    example="memory.swap_total_bytes = 8.6e9, memory.swap_in_bytes_delta = 2.1e8, memory.window_s = 5",
    fix="`sudo swapoff -a` on serving hosts, and size host RAM for the engine's pinned buffers and CPU swap space.",
    references=("seed 003 memory layer (disable swap: sudo swapoff -a)",),
), thresholds=("MEM001.swap_activity_bytes",))
def mem001(ctx: Context) -> Hit | None:
    total = ctx.measured(ctx.need(MemoryData).swap_total_bytes, "memory.swap_total_bytes")
    if total == 0:
        return None
    swap_in, swap_out = ctx.measured(ctx.need(MemoryData).swap_in_bytes_delta, "memory.swap_in_bytes_delta"), ctx.measured(ctx.need(MemoryData).swap_out_bytes_delta, "memory.swap_out_bytes_delta")
    if swap_in + swap_out < ctx.th("MEM001.swap_activity_bytes"):
        return None
    return Hit(
        title="The host is swapping",
        message=f"{(swap_in + swap_out) / 2**20:.0f} MiB moved through swap in {ctx.seen(MemoryData).window_s} s.",
        evidence={"memory.swap_total_bytes": total, "memory.swap_in_bytes_delta": swap_in,
                  "memory.swap_out_bytes_delta": swap_out, "memory.window_s": ctx.seen(MemoryData).window_s},
        severity=Severity.HIGH if swap_in > 0 else Severity.MEDIUM, certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Turn swap off on serving hosts and give the host enough RAM (or lower the engine's CPU swap "
                "space).", ("sudo swapoff -a",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("MEM002", "host-memory-pressure", Severity.HIGH, ("memory",), RuleDoc(
    what="Available host RAM is below 10% of the total.",
    why="The engine needs host memory for pinned transfer buffers, CPU KV swap and the tokenizer; near the "
        "limit the kernel reclaims page cache and may OOM-kill the server.",
    example="memory.available_pct = 4.2, memory.total_bytes = 2.7e11",
    fix="Free memory on the host, or lower the engine's CPU offload / swap space (`--swap-space`, "
        "`--cpu-offload-gb`).",
    references=("seed 001 (leave headroom: memory pressure shows as slow, random requests)",),
), thresholds=("MEM002.available_pct",))
def mem002(ctx: Context) -> Hit | None:
    avail = ctx.measured(ctx.need(MemoryData).available_pct, "memory.available_pct")
    if avail >= ctx.th("MEM002.available_pct"):
        return None
    return Hit(
        title="Host memory is nearly exhausted",
        message=f"Only {avail:.1f}% of host RAM is available.",
        evidence={"memory.available_pct": avail, "memory.available_bytes": ctx.seen(MemoryData).available_bytes,
                  "memory.total_bytes": ctx.seen(MemoryData).total_bytes},
        certainty=Certainty.CONFIRMED, impact=0.4,
        fix=Fix("Free host memory (other jobs, page-cache hogs), or lower the engine's CPU offload and swap "
                "space; see what holds it with the command below.", ("ps aux --sort=-rss | head",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("NET001", "slow-model-storage", Severity.MEDIUM, ("storage",), RuleDoc(
    what="The model directory reads sequentially at < 1 GB/s, or it sits on NFS or another network "
         "filesystem.",
    why="Weights are read at every (re)start and scale-out: at 200 MB/s a 140 GB model takes 12 minutes "
        "before the first token (seed 000 §6). Lazy-loading engines also read during serving.",
    example="storage.model_dir_fstype = 'nfs4', storage.read_gbps = 0.18",
    fix="Cache the weights on local NVMe or a persistent volume and point the server (or HF_HOME) at it.",
    references=("seed 000 §6 (network bottleneck: model download latency)", "seed 003 network layer (dd test, SSD vs NFS)"),
), thresholds=("NET001.read_gbps",))
def net001(ctx: Context) -> Hit | None:
    data = ctx.need(StorageData)
    network_fs, rate = data.model_dir_is_network_fs, data.read_gbps
    warm = data.page_cache_warm
    if network_fs is None and rate is None:
        raise MissingInput("storage.model_dir_is_network_fs and storage.read_gbps were not measured")
    evidence: dict[str, Any] = {"storage.model_dir": data.model_dir}
    reasons = []
    if network_fs:
        evidence["storage.model_dir_fstype"] = data.model_dir_fstype
        reasons.append(f"it is on a network filesystem ({data.model_dir_fstype})")
    if rate is not None and not warm and rate < ctx.th("NET001.read_gbps"):
        evidence["storage.read_gbps"] = rate
        reasons.append(f"it reads at {rate:.2f} GB/s")
    if not reasons:
        if rate is not None and warm and not network_fs:
            raise MissingInput("the read rate came from a warm page cache and says nothing about the disk")
        return None
    return Hit(
        title="The model is stored on slow or network storage",
        message=f"The model directory is slow to load: {' and '.join(reasons)}.",
        evidence=evidence, certainty=Certainty.CONFIRMED if rate is not None else Certainty.LIKELY, impact=0.2,
        fix=Fix("Copy the weights to local NVMe (or a fast persistent volume) and serve from there; set HF_HOME "
                "to that disk for hub models.",
                (f"rsync -a {data.model_dir or '<model dir>'}/ /local/nvme/models/<name>/",)),
    )


# ------------------------------------------------------------------------------------------------
@rule("NET002", "model-redownloaded-on-start", Severity.MEDIUM, ("storage",), RuleDoc(
    what="A hub model id is served while the Hugging Face cache is ephemeral (tmpfs, a container layer) or "
         "empty.",
    why="Every cold start then downloads the weights again: 20 minutes instead of 30 seconds for a large "
        "model (seed 000's before/after table), paid in GPU time and in scale-out lag.",
    example="storage.serves_hub_model_id = true, storage.hf_cache_fstype = 'overlay', "
            "storage.hf_cache_persistent = false",
    fix="Mount a persistent volume for the cache and set HF_HOME to it (or `--download-dir`), or serve from a "
        "local path.",
    references=("seed 000 §6 (model download on every cold start)",),
))
def net002(ctx: Context) -> Hit | None:
    hub = ctx.measured(ctx.need(StorageData).serves_hub_model_id, "storage.serves_hub_model_id")
    if not hub:
        return None
    persistent, empty = ctx.seen(StorageData).hf_cache_persistent, ctx.seen(StorageData).hf_cache_empty
    if persistent is None and empty is None:
        raise MissingInput("storage.hf_cache_persistent and storage.hf_cache_empty were not measured")
    if persistent is not False and not empty:
        return None
    reason = "ephemeral" if persistent is False else "empty"
    return Hit(
        title="Hub weights are downloaded again on every start",
        message=f"The server loads a hub model id and its Hugging Face cache is {reason}: each cold start "
                "downloads the weights.",
        evidence={"storage.serves_hub_model_id": True, "storage.hf_cache_dir": ctx.seen(StorageData).hf_cache_dir,
                  "storage.hf_cache_fstype": ctx.seen(StorageData).hf_cache_fstype,
                  "storage.hf_cache_persistent": persistent, "storage.hf_cache_empty": empty},
        certainty=Certainty.LIKELY, impact=0.2,
        fix=Fix("Mount a persistent volume for the Hugging Face cache and point HF_HOME at it (vLLM also takes "
                "--download-dir).", ("export HF_HOME=/mnt/persistent/hf",
                                     "vllm serve <model> --download-dir /mnt/persistent/hf")),
    )


# ------------------------------------------------------------------------------------------------
@rule("NET003", "high-client-rtt", Severity.MEDIUM, ("network",), RuleDoc(
    what="TCP connect or /health time-to-first-byte is >= 2 ms from the same host or zone, or is >= 20% of "
         "the TTFT. A slow connect is the network; a fast connect with a slow /health answer is the server's "
         "HTTP front end, reported at low severity as such.",
    why="Each streamed response pays the round trip several times (connect, TLS, first byte); a distant or "
        "congested path adds it straight onto TTFT (seed 002: 2 ms across zones became 8 ms per response).",
    example="network.same_host = true, network.tcp_connect_ms_p50 = 3.4, network.health_ttfb_ms_p50 = 6.1",
    fix="Co-locate client and server (same zone), keep connections alive, and avoid proxies on the hot path.",
    references=("seed 002 lessons (network overhead is real)", "seed 003 network layer (curl time_connect/ttfb)"),
), thresholds=("NET003.same_host_ms", "NET003.ttft_share_frac"))
def net003(ctx: Context) -> Hit | None:
    data = ctx.need(NetworkData)
    connect, ttfb = data.tcp_connect_ms_p50, data.health_ttfb_ms_p50
    if connect is None and ttfb is None:
        raise MissingInput("network.tcp_connect_ms_p50 and network.health_ttfb_ms_p50 were not measured")
    evidence: dict[str, Any] = {"network.url": data.url, "network.same_host": data.same_host,
                                "network.tcp_connect_ms_p50": connect, "network.health_ttfb_ms_p50": ttfb}
    ttft = None
    if ctx.bench is not None:
        lows = [lv for lv in ctx.bench.levels if lv.client.valid and lv.ttft_ms.p50 is not None]
        if lows:
            lv = min(lows, key=lambda x: x.concurrency or 0)
            ttft = lv.ttft_ms.p50
            evidence[f"{level_label(lv)}.ttft_ms.p50"] = ttft
    if ttft is None:
        hist = (ctx.seen(ServerMetricsData).histograms or {}).get("ttft_s") or HistogramWindow()
        if hist.p50_s is not None:
            ttft = hist.p50_s * 1000
            evidence["server_metrics.histograms.ttft_s.p50_s"] = hist.p50_s
    if not data.same_host and ttft is None:
        raise MissingInput("the server is remote and no TTFT was measured to compare the round trip with")

    def too_slow(value: float | None) -> list[str]:
        if value is None:
            return []
        out = []
        if data.same_host and value >= ctx.th("NET003.same_host_ms"):
            out.append(f"{ms(value)} on the same host, where loopback takes well under a millisecond")
        if ttft and value / ttft >= ctx.th("NET003.ttft_share_frac"):
            out.append(f"{value / ttft:.0%} of the TTFT")
        return out

    slow_connect, slow_ttfb = too_slow(connect), too_slow(ttfb)
    if slow_connect:
        return Hit(
            title="The network round trip to the server is slow",
            message=f"Opening a TCP connection to the server takes {' and '.join(slow_connect)}.",
            evidence=evidence, certainty=Certainty.LIKELY, impact=0.2,
            fix=Fix("Run the client in the same host or zone as the server, reuse connections (HTTP keep-alive), "
                    "and take proxies off the hot path; measure with the command below.", (_curl(data),)),
        )
    if slow_ttfb:
        # The connection is fast, so the time is spent inside the server before it answers.
        return Hit(
            title="The server is slow to answer even a health check",
            message=f"The connection opens in {ms(connect) if connect is not None else 'n/a'}, but /health answers "
                    f"after {' and '.join(slow_ttfb)}: the server's HTTP front end is slow to respond (a busy event "
                    "loop or a starved CPU), not the network.",
            evidence=evidence, severity=Severity.LOW, certainty=Certainty.POSSIBLE, impact=0.15,
            fix=Fix("Give the API server CPU headroom (see CPU003) and keep blocking work off its event loop; "
                    "compare with the command below while the server is idle.", (_curl(data),)),
        )
    return None


def _curl(data: dict[str, Any]) -> str:
    url = (data.url or "http://HOST:8000").rstrip("/")
    return f"curl -s -o /dev/null -w 'tcp=%{{time_connect}}s ttfb=%{{time_starttransfer}}s\\n' {url}/health"
