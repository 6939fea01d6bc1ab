"""SCHED002, max num seqs too low (rules/catalog/sched002_max_num_seqs_too_low.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    level,
    metrics,
    snapshot,
)
from tests.rule_cases.kv001 import tiny_kv

CODE = "SCHED002"


def cases() -> list[Case]:
    return [
        case("positive_seq_cap", "16 running = max_num_seqs, 40 waiting, KV at 31%",
             {**FIRES, "commands": ["--max-num-seqs 32"]},
             snapshot(cfg(max_num_seqs=16)),
             bench(level(3, "server", num_requests_running_max=16, num_requests_waiting_mean=40.0,
                         kv_cache_usage_frac_max=0.31))),
        case("positive_seq_cap_not_pow2", "24 running = max_num_seqs: doubled to 48, not rounded up to a "
             "power of two (vLLM captures graphs every 8)", {**FIRES, "commands": ["--max-num-seqs 48"]},
             snapshot(cfg(max_num_seqs=24)),
             bench(level(3, "server", num_requests_running_max=24, num_requests_waiting_mean=40.0,
                         kv_cache_usage_frac_max=0.31))),
        case("negative_kv_bound", "Waiting with a full KV cache is KV001's case, not SCHED002's",
             PASSES, snapshot(cfg(max_num_seqs=16)),
             bench(level(3, "server", num_requests_running_max=16, num_requests_waiting_mean=40.0,
                         kv_cache_usage_frac_max=0.95))),
        case("negative_small_kv_one_running", "Requests wait at 62% KV, but one runs of max_num_seqs 256: "
             "the small cache (KV001), not the sequence cap, holds them back",
             PASSES, snapshot(metrics("cache_config", num_gpu_blocks=40), drop=("logs",)),
             bench(*tiny_kv(), level(2, "server", kv_cache_usage_frac_max=0.62, kv_cache_usage_frac_mean=0.6))),
    ]
