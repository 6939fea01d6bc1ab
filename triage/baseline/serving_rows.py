"""Scheduler and cache ablations: static → continuous batching, contiguous → paged KV, prefix
caching off → on, chunked prefill off → on. Each builds two engines that differ in one knob."""
from __future__ import annotations

import random
import time

from triage.baseline.ablation_context import Context
from triage.baseline.engine_driver import (
    Driver,
    blocks,
    fit_tokens,
    greedy,
    make_engine,
    mean,
    percentile,
    synthetic_prompt,
    warm,
)
from triage.baseline.results import AblationRow, Better, measured


def batching(ctx: Context) -> AblationRow:
    cfg, vocab = ctx.cfg, ctx.model_config.vocab_size
    n = cfg.batching_num_requests
    # Long-tailed output lengths, as chat traffic has: most short, a few long (a ramp from min to max,
    # cubic by default), in a seeded random order. A static batch runs as long as its longest member.
    span = cfg.batching_max_tokens - cfg.batching_min_tokens
    lens = [cfg.batching_min_tokens + round(span * (i / max(1, n - 1)) ** cfg.batching_length_exponent)
            for i in range(n)]
    random.Random(cfg.seed).shuffle(lens)
    max_len = cfg.batching_prompt_tokens + cfg.batching_max_tokens + 8
    out: dict[str, dict[str, float | None]] = {}
    for sched in ("static", "continuous"):
        ctx.on_step(f"batching: {sched}")
        engine = make_engine(cfg, scheduler=sched, max_num_seqs=cfg.batching_max_num_seqs, max_model_len=max_len,
                             num_kv_blocks=(cfg.batching_max_num_seqs + 1) * blocks(max_len),
                             enable_prefix_caching=False)
        warm(engine, vocab)
        drv = Driver(engine)
        t0 = time.perf_counter()
        for i, m in enumerate(lens):
            drv.add(f"r{i}", synthetic_prompt(cfg.batching_prompt_tokens, vocab, seed=i), greedy(m))
        drv.run_until_done()
        wall = time.perf_counter() - t0
        e2e = [t.e2e_s for t in drv.traces.values() if t.e2e_s is not None]
        out[sched] = {"output_tokens_per_s": sum(lens) / wall, "e2e_s_p99": percentile(e2e, 99),
                      "wall_s": wall, "num_steps": drv.num_steps}
    return measured("batching", "static → continuous batching", "~2× throughput", "output tokens/s", "tok/s",
                    Better.HIGHER, "static", out["static"]["output_tokens_per_s"], "continuous",
                    out["continuous"]["output_tokens_per_s"],
                    e2e_s_p99={k: v["e2e_s_p99"] for k, v in out.items()},
                    num_steps={k: v["num_steps"] for k, v in out.items()},
                    output_tokens=lens,
                    workload=f"{n} requests at once, {cfg.batching_prompt_tokens}-token prompts, long-tailed "
                             f"{cfg.batching_min_tokens}–{cfg.batching_max_tokens} output tokens (mean "
                             f"{sum(lens) / n:.1f}), max_num_seqs={cfg.batching_max_num_seqs}")


def kv_layout(ctx: Context) -> AblationRow:
    cfg, vocab = ctx.cfg, ctx.model_config.vocab_size
    max_len = fit_tokens(cfg.kv_max_model_len, ctx.model_config.max_position_embeddings, 0, "max_model_len",
                         minimum=cfg.kv_prompt_tokens + cfg.kv_output_tokens)
    budget_tokens = max(cfg.kv_budget_tokens, max_len)
    out: dict[str, dict[str, float]] = {}
    for layout in ("contiguous", "paged"):
        ctx.on_step(f"kv layout: {layout}")
        engine = make_engine(cfg, kv_layout=layout, max_num_seqs=cfg.kv_max_num_seqs, max_model_len=max_len,
                             num_kv_blocks=budget_tokens // 16, enable_prefix_caching=False,
                             max_num_batched_tokens=max(2048, cfg.kv_prompt_tokens))
        drv = Driver(engine)
        t0 = time.perf_counter()
        for i in range(cfg.kv_num_requests):
            drv.add(f"r{i}", synthetic_prompt(cfg.kv_prompt_tokens, vocab, seed=i), greedy(cfg.kv_output_tokens))
        drv.run_until_done()
        wall = time.perf_counter() - t0
        out[layout] = {"max_concurrency": float(drv.max_running), "wall_s": wall,
                       "output_tokens_per_s": cfg.kv_num_requests * cfg.kv_output_tokens / wall,
                       "kv_tokens_capacity": float(engine.stats().kv_cache_tokens_capacity)}
    return measured("kv-layout", "contiguous → paged KV cache", "4× concurrency", "max concurrent requests", "reqs",
                    Better.HIGHER, "contiguous", out["contiguous"]["max_concurrency"], "paged",
                    out["paged"]["max_concurrency"],
                    output_tokens_per_s={k: v["output_tokens_per_s"] for k, v in out.items()},
                    kv_tokens_capacity={k: v["kv_tokens_capacity"] for k, v in out.items()},
                    workload=f"{cfg.kv_num_requests} requests of {cfg.kv_prompt_tokens}+{cfg.kv_output_tokens} tokens, "
                             f"max_model_len={max_len}, the same KV budget of {budget_tokens} tokens, "
                             f"max_num_seqs={cfg.kv_max_num_seqs}")


def prefix_cache(ctx: Context) -> AblationRow:
    cfg, vocab = ctx.cfg, ctx.model_config.vocab_size
    prefix_len = fit_tokens(cfg.prefix_tokens, ctx.model_config.max_position_embeddings,
                            cfg.prefix_suffix_tokens + 8, "a shared prefix", minimum=16)
    prefix = synthetic_prompt(prefix_len, vocab, seed=7)
    max_len = prefix_len + cfg.prefix_suffix_tokens + 8
    out: dict[str, dict[str, float | None]] = {}
    for enabled in (False, True):
        name = "on" if enabled else "off"
        ctx.on_step(f"prefix caching: {name}")
        engine = make_engine(cfg, enable_prefix_caching=enabled, max_model_len=max_len, max_num_seqs=4,
                             num_kv_blocks=4 * blocks(max_len), max_num_batched_tokens=max_len)
        warm(engine, vocab)
        ttfts = []
        for i in range(cfg.prefix_num_requests):
            drv = Driver(engine)
            drv.add(f"p{i}", prefix + synthetic_prompt(cfg.prefix_suffix_tokens, vocab, seed=100 + i), greedy(1))
            drv.run_until_done()
            ttfts.append(drv.traces[f"p{i}"].ttft_s)
        st = engine.stats()
        out[name] = {"ttft_first_s": ttfts[0], "ttft_mean_s": mean(ttfts[1:]),
                     "hit_frac": st.prefix_cache_hits_total / max(1, st.prefix_cache_queries_total)}
    ms = {k: (None if v["ttft_mean_s"] is None else v["ttft_mean_s"] * 1e3) for k, v in out.items()}
    return measured("prefix-cache", "prefix caching off → on", None, "TTFT, shared prefix (mean)", "ms",
                    Better.LOWER, "off", ms["off"], "on", ms["on"],
                    ttft_first_request_ms={k: v["ttft_first_s"] * 1e3 for k, v in out.items()},
                    prefix_cache_hit_frac={k: v["hit_frac"] for k, v in out.items()},
                    workload=f"{cfg.prefix_num_requests} requests one after another, a shared {prefix_len}-token "
                             f"prefix + {cfg.prefix_suffix_tokens} own tokens; the mean excludes the first request")


def chunked_prefill(ctx: Context) -> list[AblationRow]:
    cfg, vocab = ctx.cfg, ctx.model_config.vocab_size
    long_len = fit_tokens(cfg.chunk_long_prompt_tokens, ctx.model_config.max_position_embeddings, 16,
                          "a long prompt", minimum=2 * cfg.chunk_budget_tokens)
    max_len = max(long_len + 8, 16 + cfg.chunk_decode_tokens + 8)
    num_seqs = cfg.chunk_num_decoding + cfg.chunk_num_long
    out: dict[str, dict[str, float | None]] = {}
    for enabled in (False, True):
        name = "on" if enabled else "off"
        ctx.on_step(f"chunked prefill: {name}")
        budget = cfg.chunk_budget_tokens if enabled else long_len + cfg.chunk_num_decoding
        engine = make_engine(cfg, enable_chunked_prefill=enabled, max_num_batched_tokens=budget,
                             max_num_seqs=num_seqs, max_model_len=max_len, enable_prefix_caching=False,
                             num_kv_blocks=(num_seqs + 1) * blocks(max_len))
        warm(engine, vocab)
        drv = Driver(engine)
        for i in range(cfg.chunk_num_decoding):
            drv.add(f"d{i}", synthetic_prompt(16, vocab, seed=i), greedy(cfg.chunk_decode_tokens))
        while min(len(drv.traces[f"d{i}"].token_times_s) for i in range(cfg.chunk_num_decoding)) < 3:
            drv.step()
        for j in range(cfg.chunk_num_long):
            drv.add(f"long{j}", synthetic_prompt(long_len, vocab, seed=50 + j), greedy(1))
        drv.run_until_done()
        decoders = [drv.traces[f"d{i}"] for i in range(cfg.chunk_num_decoding)]
        itls = [x for t in decoders for x in t.itls_s]
        tpots = [t.tpot_s for t in decoders if t.tpot_s is not None]
        out[name] = {"tpot_ms_p99": _ms(percentile(tpots, 99)), "itl_ms_p99": _ms(percentile(itls, 99)),
                     "itl_ms_max": _ms(max(itls) if itls else None),
                     "long_ttft_ms": _ms(mean([drv.traces[f"long{j}"].ttft_s for j in range(cfg.chunk_num_long)])),
                     "long_prefill_steps": drv.traces["long0"].num_steps_to_first_token}
    details = dict(itl_ms_p99={k: v["itl_ms_p99"] for k, v in out.items()},
                   itl_ms_max={k: v["itl_ms_max"] for k, v in out.items()},
                   tpot_ms_p99={k: v["tpot_ms_p99"] for k, v in out.items()},
                   long_prompt_ttft_ms={k: v["long_ttft_ms"] for k, v in out.items()},
                   long_prompt_prefill_steps={k: v["long_prefill_steps"] for k, v in out.items()},
                   workload=f"{cfg.chunk_num_decoding} requests decoding {cfg.chunk_decode_tokens} tokens while "
                            f"{cfg.chunk_num_long} prompt(s) of {long_len} tokens arrive; chunk budget "
                            f"{cfg.chunk_budget_tokens} tokens when on",
                   note="TPOT averages a stall over all of a request's tokens; the inter-token gap (ITL) "
                        "shows the stall itself")
    return [measured("chunked-prefill", "chunked prefill off → on", None, "TPOT p99 of running decodes", "ms",
                     Better.LOWER, "off", out["off"]["tpot_ms_p99"], "on", out["on"]["tpot_ms_p99"], **details),
            measured("chunked-prefill-itl", "chunked prefill off → on", None, "ITL p99 of running decodes", "ms",
                     Better.LOWER, "off", out["off"]["itl_ms_p99"], "on", out["on"]["itl_ms_p99"], **details)]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3
