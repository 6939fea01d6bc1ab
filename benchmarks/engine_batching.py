"""Benchmark 1: continuous vs static batching throughput (issue target: >= 2x).

64 requests with mixed prompt lengths and a long-tailed output-length mix (most answers short, a few
long, as in chat traffic), all queued at t=0, run through the same engine configuration (``small``
preset, paged KV, SDPA) except for the scheduler. Static batching takes ``max_num_seqs`` requests,
runs them until the longest finishes, then takes the next batch. It is charged no padding compute
(our static batch is ragged), so the measured gap is a conservative lower bound for HF-style
padded static batching.
"""
from __future__ import annotations

import random
import time

from engine_common import host_info, parser, write_result

NAME = "engine_batching"


def workload(n: int, seed: int) -> list[tuple[list[int], int]]:
    rng = random.Random(seed)
    reqs = []
    for _ in range(n):
        prompt_len = rng.randint(16, 160)
        output_len = rng.randint(96, 128) if rng.random() < 0.2 else rng.randint(4, 32)
        reqs.append(([rng.randrange(0, 256) for _ in range(prompt_len)], output_len))
    return reqs


def run(scheduler: str, reqs, args) -> dict:
    import torch

    from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams

    torch.set_num_threads(args.threads)
    engine = LLMEngine(EngineConfig(model=args.model, scheduler=scheduler, max_num_seqs=args.max_num_seqs,
                                    max_num_batched_tokens=args.max_num_batched_tokens, max_model_len=512,
                                    num_kv_blocks=args.num_kv_blocks, enable_prefix_caching=False))
    engine.generate([[1, 2, 3]], SamplingParams(max_tokens=2, temperature=0.0))          # warm-up
    steps, batch_sizes = 0, []
    for i, (prompt, out_len) in enumerate(reqs):
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=out_len, temperature=0.0, ignore_eos=True))
    t0 = time.perf_counter()
    ttft, done = [], 0
    while engine.has_unfinished():
        outs = engine.step()
        steps += 1
        batch_sizes.append(engine.last_step.num_seqs)
        for o in outs:
            if o.num_output_tokens == 1:
                ttft.append(o.times.first_token_s - o.times.arrival_s)
            done += o.finished
    wall = time.perf_counter() - t0
    gen = sum(n for _, n in reqs)
    ttft.sort()
    return {"scheduler": scheduler, "wall_s": wall, "generated_tokens": gen, "output_tok_per_s": gen / wall,
            "requests_per_s": done / wall, "num_steps": steps,
            "mean_batch_size": sum(batch_sizes) / len(batch_sizes),
            "ttft_p50_s": ttft[len(ttft) // 2], "ttft_p99_s": ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))]}


def main() -> None:
    p = parser(NAME, __doc__)
    p.add_argument("--model", default="small")
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--max-num-batched-tokens", type=int, default=512)
    p.add_argument("--num-kv-blocks", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    started = time.perf_counter()
    host = host_info(args.threads)
    reqs = workload(args.num_requests, args.seed)
    static = run("static", reqs, args)
    continuous = run("continuous", reqs, args)
    speedup = continuous["output_tok_per_s"] / static["output_tok_per_s"]
    write_result(args.out, NAME, {
        "host": host, "config": vars(args) | {"out": str(args.out)},
        "workload": {"num_requests": len(reqs), "prompt_tokens_mean": sum(len(p) for p, _ in reqs) / len(reqs),
                     "output_tokens_mean": sum(n for _, n in reqs) / len(reqs),
                     "output_tokens_max": max(n for _, n in reqs)},
        "static": static, "continuous": continuous,
        "summary": {"throughput_speedup_x": round(speedup, 2), "target_x": 2.0, "meets_target": speedup >= 2.0,
                    "static_tok_per_s": round(static["output_tok_per_s"], 1),
                    "continuous_tok_per_s": round(continuous["output_tok_per_s"], 1)},
    }, started)


if __name__ == "__main__":
    main()
