"""Benchmark 3: attention prefill at 1K / 4K / 8K context, naive vs tiled vs SDPA: time and peak memory.

Target: tiled or SDPA >= 3x faster than naive at 8K, with memory linear in N. One causal prefill of
N tokens over a paged cache (16-token blocks scattered at random), ``small``-preset head geometry
reduced to 4 query / 2 KV heads of 64 so that the naive backend's N x N score matrix still fits a
shared box at 8K. Each case runs in a fresh subprocess; its peak extra memory is the growth of the
process's max RSS during the attention call (the inputs and cache are allocated before).
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from engine_common import REPO, host_info, parser, write_result

NAME = "engine_attention"
BACKENDS = ("naive", "tiled", "sdpa")


def child(backend: str, n: int, heads: int, kv_heads: int, head_dim: int, threads: int, repeats: int) -> dict:
    import gc
    import random

    import torch

    from triage.reference_engine.layers.attention import get_backend
    from triage.reference_engine.layers.attention.base import AttentionMetadata

    torch.set_num_threads(threads)
    block_size = 16
    num_blocks = n // block_size + 8
    gen = torch.Generator().manual_seed(0)
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen)
    q = torch.randn(n, heads, head_dim, generator=gen)
    table = list(range(num_blocks))
    random.Random(0).shuffle(table)
    meta = AttentionMetadata(q_starts=[0], q_lens=[n], kv_lens=[n], block_tables=[table[: n // block_size]],
                             block_size=block_size)
    fn = get_backend(backend)
    gc.collect()
    rss_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = fn(q, k_cache, v_cache, meta, head_dim ** -0.5)
            times.append(time.perf_counter() - t0)
    peak_extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kib) * 1024
    return {"backend": backend, "context_tokens": n, "time_s_min": min(times), "time_s_all": times,
            "peak_extra_bytes": peak_extra, "output_bytes": out.numel() * out.element_size(),
            "score_matrix_bytes_if_materialized": heads * n * n * 4}


def main() -> None:
    p = parser(NAME, __doc__)
    p.add_argument("--contexts", type=int, nargs="+", default=[1024, 4096, 8192])
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--child", nargs=2, metavar=("BACKEND", "N"), help=argparse_hidden())
    args = p.parse_args()
    if args.child:
        n = int(args.child[1])
        repeats = 3 if n <= 1024 else 1
        print(json.dumps(child(args.child[0], n, args.heads, args.kv_heads, args.head_dim, args.threads, repeats)))
        return
    started = time.perf_counter()
    host = host_info(args.threads)
    cases = []
    for n in args.contexts:
        for backend in BACKENDS:
            cmd = [sys.executable, __file__, "--child", backend, str(n), "--heads", str(args.heads),
                   "--kv-heads", str(args.kv_heads), "--head-dim", str(args.head_dim), "--threads", str(args.threads)]
            res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
            if res.returncode != 0:
                cases.append({"backend": backend, "context_tokens": n, "error": res.stderr.strip()[-500:]})
                continue
            case = json.loads(res.stdout.strip().splitlines()[-1])
            cases.append(case)
            print(f"{backend:>6} N={n:>5}: {case['time_s_min']:.3f} s, peak extra "
                  f"{case['peak_extra_bytes'] / 2**20:.1f} MiB", flush=True)
    by = {(c["backend"], c["context_tokens"]): c for c in cases if "error" not in c}
    summary = {}
    for n in args.contexts:
        naive = by.get(("naive", n))
        for b in ("tiled", "sdpa"):
            if naive and (b, n) in by:
                summary[f"{b}_speedup_vs_naive_at_{n}_x"] = round(naive["time_s_min"] / by[(b, n)]["time_s_min"], 2)
        for b in BACKENDS:
            if (b, n) in by:
                summary[f"{b}_peak_extra_mib_at_{n}"] = round(by[(b, n)]["peak_extra_bytes"] / 2**20, 1)
    top = max(args.contexts)
    best = max((summary.get(f"{b}_speedup_vs_naive_at_{top}_x", 0) for b in ("tiled", "sdpa")), default=0)
    summary.update({"target_x": 3.0, "meets_target": best >= 3.0})
    write_result(args.out, NAME, {"host": host, "config": {k: v for k, v in vars(args).items() if k != "child"}
                                  | {"out": str(args.out)}, "cases": cases, "summary": summary}, started)


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
