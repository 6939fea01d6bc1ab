"""Write the /metrics captures of tests/fixtures/topologies/: deployments the reference engine cannot run (data
parallel ranks, prefill/decode instances joined by a KV connector, KV offload, MoE expert balancing).

Each capture is exposition text written by prometheus_client, the library the engines export with, from metric
definitions read off the engines' own exposition code at a tabled version: the same names, types, label names
and buckets (the source lines are in DEFINITIONS below and in each file's header). The *values* are a scenario,
not a measurement: every file says so in its first lines. Two scrapes per scenario (`.before.prom`,
`.after.prom`), 10 s apart, so a window has deltas.

    python scripts/make_topology_captures.py            # rewrite the captures
    python scripts/make_topology_captures.py --check    # exit 1 when a capture differs from what it would write
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, disable_created_metrics
from prometheus_client.exposition import generate_latest

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "topologies"

# vllm==0.20.2: vllm/v1/metrics/loggers.py (labelnames ["model_name", "engine"] L429; TTFT buckets L757-778;
# request_latency_buckets L847-868), vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py (L140-220),
# offloading/metrics.py (L92-120).
V_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
          80.0, 160.0, 640.0, 2560.0]
V_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
             960.0, 1920.0, 7680.0]
V_NIXL_TIME = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0]
V_NIXL_BYTES = [2 ** (10 + i) for i in range(1, 25, 2)]
# sglang==0.5.10: sglang/srt/observability/scheduler_metrics_mixin.py (labels L133-143),
# sglang/srt/observability/metrics_collector.py (kv_transfer_latency_ms L363-368, kv_transfer_total_mb L381-386,
# eplb_balancedness L613-617).
S_TRANSFER_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
S_TRANSFER_MB = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)
S_QUEUE = [0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
# The tokenizer's TTFT histogram: labels {model_name} (sglang/srt/managers/tokenizer_manager.py L419-421), buckets
# metrics_collector.py L1194-1214.
S_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
DEFINITIONS = {"vllm": "vllm==0.20.2 vllm/v1/metrics/loggers.py, kv_connector/v1/nixl/stats.py, "
                       "kv_connector/v1/offloading/metrics.py",
               "sglang": "sglang==0.5.10 sglang/srt/observability/metrics_collector.py, scheduler_metrics_mixin.py"}


def _vllm(reg: CollectorRegistry, ranks: dict[str, dict], connector: dict | None, offload: dict | None) -> None:
    labels = ["model_name", "engine"]
    running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, registry=reg)
    waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, registry=reg)
    kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, registry=reg)
    success = Counter("vllm:request_success", "Count of successfully processed requests.", labels + ["finished_reason"],
                      registry=reg)
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                     buckets=V_TTFT, registry=reg)
    queue = Histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                      labels, buckets=V_LATENCY, registry=reg)
    prefill = Histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                        labels, buckets=V_LATENCY, registry=reg)
    queries = Counter("vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector "
                      "cross-instance cache sharing, in terms of number of queried tokens.", labels, registry=reg)
    hits = Counter("vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector cross-instance "
                   "cache sharing, in terms of number of cached tokens.", labels, registry=reg)
    for rank, r in ranks.items():
        key = ("demo-model", rank)
        running.labels(*key).set(r["running"])
        waiting.labels(*key).set(r["waiting"])
        kv.labels(*key).set(r["kv"])
        success.labels(*key, "stop").inc(r["requests"])
        for _ in range(r["requests"]):
            ttft.labels(*key).observe(r["ttft_s"])
            queue.labels(*key).observe(r["queue_s"])
            prefill.labels(*key).observe(r["prefill_s"])
        queries.labels(*key).inc(r.get("ext_queries", 0))
        hits.labels(*key).inc(r.get("ext_hits", 0))
    if connector:
        time = Histogram("vllm:nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers.",
                         labels, buckets=V_NIXL_TIME, registry=reg)
        size = Histogram("vllm:nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers.",
                         labels, buckets=V_NIXL_BYTES, registry=reg)
        failed = Counter("vllm:nixl_num_failed_transfers", "Number of failed NIXL KV Cache transfers.", labels,
                         registry=reg)
        for _ in range(connector["transfers"]):
            time.labels("demo-model", "0").observe(connector["time_s"])
            size.labels("demo-model", "0").observe(connector["bytes"])
        failed.labels("demo-model", "0").inc(connector.get("failed", 0))
    if offload:
        moved = Counter("vllm:kv_offload_total_bytes", "Number of bytes offloaded by KV connector",
                        labels + ["transfer_type"], registry=reg)
        spent = Counter("vllm:kv_offload_total_time", "Total time measured by all KV offloading operations",
                        labels + ["transfer_type"], registry=reg)
        for kind, (nbytes, secs) in offload.items():
            moved.labels("demo-model", "0", kind).inc(nbytes)
            spent.labels("demo-model", "0", kind).inc(secs)


def _sglang(reg: CollectorRegistry, role: str, ranks: dict[str, dict], transfer: dict | None,
            balance: tuple[int, float] | None, ttft: tuple[int, float] | None = None) -> None:
    labels = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank"]
    running = Gauge("sglang:num_running_reqs", "The number of running requests.", labels, registry=reg)
    waiting = Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", labels, registry=reg)
    usage = Gauge("sglang:token_usage", "The token usage.", labels, registry=reg)
    queue = Histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", labels, buckets=S_QUEUE,
                      registry=reg)
    for rank, r in ranks.items():
        key = ("demo-moe", role, "0", "0", rank, rank)
        running.labels(*key).set(r["running"])
        waiting.labels(*key).set(r["waiting"])
        usage.labels(*key).set(r["kv"])
        for _ in range(r["requests"]):
            queue.labels(*key).observe(r["queue_s"])
    if transfer:
        latency = Histogram("sglang:kv_transfer_latency_ms", "Histogram of KV cache transfer latency in ms.", labels,
                            buckets=S_TRANSFER_MS, registry=reg)
        size = Histogram("sglang:kv_transfer_total_mb", "Histogram of KV cache transfer total size in MB.", labels,
                         buckets=S_TRANSFER_MB, registry=reg)
        Counter("sglang:num_transfer_failed_reqs_total", "The number of failed transfer requests.", labels,
                registry=reg).labels("demo-moe", role, "0", "0", "0", "0").inc(0)
        for _ in range(transfer["transfers"]):
            latency.labels("demo-moe", role, "0", "0", "0", "0").observe(transfer["ms"])
            size.labels("demo-moe", role, "0", "0", "0", "0").observe(transfer["mb"])
    if ttft:
        h = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                      ["model_name"], buckets=S_TTFT, registry=reg)
        for _ in range(ttft[0]):
            h.labels("demo-moe").observe(ttft[1])
    if balance:
        s = Summary("sglang:eplb_balancedness", "Balancedness of MoE in expert parallelism.", labels + ["forward_mode"],
                    registry=reg)
        for _ in range(balance[0]):
            s.labels("demo-moe", role, "0", "0", "0", "0", "decode").observe(balance[1])


def _rank(running, waiting, kv, requests, ttft_s, queue_s=0.0, prefill_s=0.05, **more) -> dict:
    return dict(running=running, waiting=waiting, kv=kv, requests=requests, ttft_s=ttft_s, queue_s=queue_s,
                prefill_s=prefill_s, **more)


def _scale(ranks: dict[str, dict], k: float) -> dict[str, dict]:
    """The 'before' scrape: the same gauges, counters k times smaller (10 s earlier)."""
    out = {}
    for rank, r in ranks.items():
        out[rank] = {**r, "requests": int(r["requests"] * k), "ext_queries": int(r.get("ext_queries", 0) * k),
                     "ext_hits": int(r.get("ext_hits", 0) * k)}
    return out


HOT = {"0": _rank(18, 0, 0.34, 400, 0.09), "1": _rank(17, 0, 0.31, 390, 0.08),
       "2": _rank(64, 23, 0.97, 120, 2.4, queue_s=2.2), "3": _rank(19, 0, 0.36, 410, 0.09)}
EVEN = {r: _rank(20, 0, 0.35, 400, 0.09) for r in "0123"}
DECODE = {"0": _rank(40, 0, 0.42, 300, 1.25, prefill_s=0.03)}
DECODE_OK = {"0": _rank(40, 0, 0.42, 300, 0.24, prefill_s=0.03)}
OFFLOAD = {"0": _rank(30, 0, 0.88, 300, 0.35, ext_queries=600_000, ext_hits=9_000)}


def _scenarios() -> dict[str, tuple[str, str, callable]]:
    """name -> (engine, what it shows, fn(registry, k)) where k is 1 for the after-scrape and 0.5 for before."""
    return {
        "vllm_dp4_hot_rank": ("vllm", "vLLM 0.20.2, --data-parallel-size 4: rank 2 queues 23 requests with its KV "
                              "cache 97% full while ranks 0, 1 and 3 have empty queues",
                              lambda reg, k: _vllm(reg, _scale(HOT, k), None, None)),
        "vllm_dp4_balanced": ("vllm", "vLLM 0.20.2, --data-parallel-size 4: four ranks equally loaded",
                              lambda reg, k: _vllm(reg, _scale(EVEN, k), None, None)),
        "vllm_pd_decode_transfer_bound": (
            "vllm", "vLLM 0.20.2 decode instance (NixlConnector, kv_consumer): TTFT 1.25 s of which the NIXL "
            "transfer is 0.9 s per request, at 2.2 GB/s", lambda reg, k: _vllm(
                reg, _scale(DECODE, k), {"transfers": int(300 * k), "time_s": 0.9, "bytes": 2_000_000_000}, None)),
        "vllm_pd_decode_healthy": (
            "vllm", "vLLM 0.20.2 decode instance (NixlConnector): TTFT 0.24 s, the NIXL transfer 0.02 s",
            lambda reg, k: _vllm(reg, _scale(DECODE_OK, k),
                                 {"transfers": int(300 * k), "time_s": 0.02, "bytes": 300_000_000}, None)),
        "vllm_offload_low_hit": (
            "vllm", "vLLM 0.20.2 with --kv-offloading-size: 1.5% of looked-up tokens found in the CPU tier; 24 GB "
            "moved to it between the scrapes", lambda reg, k: _vllm(reg, _scale(OFFLOAD, k), None,
                                                         {"GPU_to_CPU": (48e9 * k, 3.0 * k), "CPU_to_GPU": (0.4e9 * k, 0.1 * k)})),
        "sglang_dp4_eplb_skewed": (
            "sglang", "SGLang 0.5.10, --dp-size 4 --enable-dp-attention --ep-size 4: expert balancedness 0.42, rank 1 "
            "queues 18", lambda reg, k: _sglang(reg, "unified", {
                "0": dict(running=32, waiting=0, kv=0.4, requests=int(300 * k), queue_s=0.05),
                "1": dict(running=96, waiting=18, kv=0.95, requests=int(90 * k), queue_s=4.0),
                "2": dict(running=30, waiting=0, kv=0.38, requests=int(310 * k), queue_s=0.05),
                "3": dict(running=33, waiting=0, kv=0.41, requests=int(300 * k), queue_s=0.05)},
                None, (int(4000 * k) or 1, 0.42))),
        "sglang_pd_prefill_saturated": (
            "sglang", "SGLang 0.5.10 prefill instance: 41 requests queued, KV 96% full",
            lambda reg, k: _sglang(reg, "prefill", {"0": dict(running=8, waiting=41, kv=0.96, requests=int(200 * k),
                                                              queue_s=3.5)}, {"transfers": int(200 * k), "ms": 40,
                                                                              "mb": 400}, None)),
        "sglang_pd_decode_idle": (
            "sglang", "SGLang 0.5.10 decode instance: 6 running, nothing queued, KV 12% full, TTFT 3.9 s (the "
            "prefill side's queue)",
            lambda reg, k: _sglang(reg, "decode", {"0": dict(running=6, waiting=0, kv=0.12, requests=int(200 * k),
                                                             queue_s=0.0)}, None, None, (int(200 * k), 3.9))),
        "sglang_pd_decode_busy": (
            "sglang", "SGLang 0.5.10 decode instance: 120 running, 2 queued, KV 81% full",
            lambda reg, k: _sglang(reg, "decode", {"0": dict(running=120, waiting=2, kv=0.81, requests=int(200 * k),
                                                             queue_s=0.1)}, None, None, (int(200 * k), 0.35))),
        "sglang_pd_prefill_ok": (
            "sglang", "SGLang 0.5.10 prefill instance: 4 running, nothing queued, KV 30% full",
            lambda reg, k: _sglang(reg, "prefill", {"0": dict(running=4, waiting=0, kv=0.30, requests=int(200 * k),
                                                              queue_s=0.02)}, {"transfers": int(200 * k), "ms": 30,
                                                                               "mb": 400}, None)),
    }


def render(name: str, engine: str, what: str, fn, k: float) -> str:
    disable_created_metrics()      # the *_created samples are wall-clock times: the files would never repeat
    reg = CollectorRegistry()
    fn(reg, k)
    header = (f"# triage capture {name}.{'after' if k == 1 else 'before'}: NOT a measurement. Exposition by "
              f"prometheus_client from the metric definitions of {DEFINITIONS[engine]}; the values are a scenario: "
              f"{what}. Written by scripts/make_topology_captures.py.\n")
    return header + generate_latest(reg).decode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the files instead of writing them")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, (engine, what, fn) in _scenarios().items():
        for k, suffix in ((0.5, "before"), (1.0, "after")):
            path = OUT / f"{name}.{suffix}.prom"
            text = render(name, engine, what, fn, k)
            if args.check:
                if not path.exists() or path.read_text() != text:
                    stale.append(path.name)
            else:
                path.write_text(text)
    if stale:
        print("stale captures (run scripts/make_topology_captures.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
