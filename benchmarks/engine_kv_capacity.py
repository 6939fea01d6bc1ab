"""Benchmark 2: concurrent sequences at an equal KV byte budget, paged vs contiguous (target >= 4x).

Both engines get the same KV cache bytes. The contiguous "before" reserves ``max_model_len`` (4096)
token slots per sequence when it is admitted; the paged cache hands out 16-token blocks as sequences
grow. The request mix has a realistic long tail (prompt + output ~600 tokens on average, capped at
4096), all queued at t=0, and runs through the real engine (``tiny`` preset so the run stays short
on CPU: the capacity result depends on KV bookkeeping, not on model size). We record how many
sequences were running at once (peak and step-weighted mean), KV bytes reserved vs used, and
throughput.
"""
from __future__ import annotations

import math
import random
import time

from engine_common import host_info, parser, write_result

NAME = "engine_kv_capacity"


def workload(n: int, seed: int, max_model_len: int) -> list[tuple[list[int], int]]:
    rng = random.Random(seed)
    reqs = []
    for _ in range(n):
        prompt_len = min(int(rng.lognormvariate(math.log(380), 0.7)), max_model_len - 600)
        output_len = min(int(rng.lognormvariate(math.log(110), 0.6)), 512)
        reqs.append(([rng.randrange(256) for _ in range(max(prompt_len, 8))], max(output_len, 4)))
    return reqs


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def run(layout: str, reqs, args) -> dict:
    import torch

    from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams

    torch.set_num_threads(args.threads)
    engine = LLMEngine(EngineConfig(model=args.model, kv_layout=layout, max_model_len=args.max_model_len,
                                    kv_cache_bytes=args.kv_cache_bytes, max_num_seqs=args.max_num_seqs,
                                    max_num_batched_tokens=args.max_num_batched_tokens,
                                    enable_prefix_caching=False))
    for i, (prompt, out_len) in enumerate(reqs):
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=out_len, temperature=0.0, ignore_eos=True))
    running, reserved_frac, used_frac, saturated = [], [], [], []
    t0 = time.perf_counter()
    while engine.has_unfinished():
        engine.step()
        s = engine.stats()
        running.append(s.num_requests_running)
        reserved_frac.append(s.kv_reserved_bytes / s.kv_cache_bytes)
        used_frac.append(s.kv_used_bytes / s.kv_cache_bytes)
        if s.num_requests_waiting > 0:          # the queue is not empty: KV is the binding limit
            saturated.append((s.num_requests_running, s.kv_used_bytes / s.kv_cache_bytes))
    wall = time.perf_counter() - t0
    s = engine.stats()
    busy = [r for r in running if r > 0]
    return {"kv_layout": layout, "kv_cache_bytes": s.kv_cache_bytes, "kv_cache_tokens_capacity": s.kv_cache_tokens_capacity,
            "num_kv_blocks_total": s.num_kv_blocks_total, "block_size": s.block_size,
            "peak_running_seqs": max(running), "mean_running_seqs": sum(busy) / len(busy),
            "mean_kv_reserved_frac": sum(reserved_frac) / len(reserved_frac),
            "mean_kv_used_frac": sum(used_frac) / len(used_frac),
            "num_steps_with_queue": len(saturated),
            "mean_running_seqs_with_queue": _mean([r for r, _ in saturated]),
            "mean_kv_used_frac_with_queue": _mean([u for _, u in saturated]),
            "num_preemptions": s.num_preemptions_total, "num_steps": len(running), "wall_s": wall,
            "output_tok_per_s": s.generation_tokens_total / wall}


def main() -> None:
    p = parser(NAME, __doc__)
    p.add_argument("--model", default="tiny")
    p.add_argument("--num-requests", type=int, default=200)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--kv-cache-bytes", type=int, default=None,
                   help="equal budget for both layouts (default: 16 contiguous max_model_len slots)")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    from triage.reference_engine import load_model_config

    per_token = load_model_config(args.model).kv_bytes_per_token(4)
    if args.kv_cache_bytes is None:
        args.kv_cache_bytes = 16 * args.max_model_len * per_token
    started = time.perf_counter()
    host = host_info(args.threads)
    reqs = workload(args.num_requests, args.seed, args.max_model_len)
    contiguous = run("contiguous", reqs, args)
    paged = run("paged", reqs, args)
    lengths = [len(pr) + n for pr, n in reqs]
    ratio = paged["peak_running_seqs"] / contiguous["peak_running_seqs"]
    write_result(args.out, NAME, {
        "host": host, "config": vars(args) | {"out": str(args.out)},
        "workload": {"num_requests": len(reqs), "total_tokens_mean": sum(lengths) / len(lengths),
                     "total_tokens_p50": sorted(lengths)[len(lengths) // 2], "total_tokens_max": max(lengths),
                     "kv_bytes_per_token": per_token},
        "contiguous": contiguous, "paged": paged,
        "summary": {"concurrency_ratio_x": round(ratio, 2),
                    "mean_concurrency_ratio_with_queue_x": round(paged["mean_running_seqs_with_queue"]
                                                                 / contiguous["mean_running_seqs_with_queue"], 2),
                    "throughput_ratio_x": round(paged["output_tok_per_s"] / contiguous["output_tok_per_s"], 2),
                    "target_x": 4.0, "meets_target": ratio >= 4.0,
                    "contiguous_peak_seqs": contiguous["peak_running_seqs"], "paged_peak_seqs": paged["peak_running_seqs"],
                    "contiguous_mean_seqs_with_queue": round(contiguous["mean_running_seqs_with_queue"], 1),
                    "paged_mean_seqs_with_queue": round(paged["mean_running_seqs_with_queue"], 1),
                    "contiguous_kv_used_frac_with_queue": round(contiguous["mean_kv_used_frac_with_queue"], 3),
                    "paged_kv_used_frac_with_queue": round(paged["mean_kv_used_frac_with_queue"], 3)},
    }, started)


if __name__ == "__main__":
    main()
