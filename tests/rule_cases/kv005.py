"""KV005, prefix cache ineffective (rules/catalog/kv005_prefix_cache_ineffective.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    bench,
    case,
    cfg,
    levels,
    metrics,
    run_config,
    snapshot,
)

CODE = "KV005"


def cases() -> list[Case]:
    return [
        case("negative_default_tgi_2_4", "TGI 2.4 with no PREFIX_CACHING set: its launcher turns prefix "
             "caching on by default from 2.3, so it is never called turned off", PASSES,
             snapshot(cfg(engine="tgi", engine_version="2.4.1", enable_prefix_caching=None)), bench()),
        case("positive_disabled_v1", "vLLM 0.18 started with --no-enable-prefix-caching; 400-token shared prompt",
             {**FIRES, "severity": "medium", "certainty": "confirmed", "text_contains": ["Remove `--no-enable-prefix-caching`"]},
             snapshot(cfg(enable_prefix_caching=False), cfg("sources", enable_prefix_caching="cmdline")),
             bench()),
        case("positive_disabled_v0", "vLLM 0.6 (V0): prefix caching off by default, must be enabled",
             {**FIRES, "commands": ["--enable-prefix-caching"]},
             snapshot(cfg(engine_version="0.6.3", enable_prefix_caching=False)), bench()),
        case("positive_low_hit_rate", "Shared 1024-token prefix but 2% hit rate",
             {**FIRES, "evidence_keys": ["bench.c16.server.prefix_cache_hit_rate"]},
             snapshot(), bench(run_config(shared_prefix_len=1024), levels("server", prefix_cache_hit_rate=0.02))),
        case("positive_low_hit_rate_state_assumed", "2% hit rate on vLLM 0.33 where only the default says prefix "
             "caching is on: vLLM decides it per model, so the finding is hedged",
             {**FIRES, "certainty": "possible", "text_contains": ["attention-free, encoder-decoder and some pooling models"]},
             snapshot(cfg(engine_version="0.33.0", enable_prefix_caching=None),
                      cfg("sources", enable_prefix_caching="default"),
                      metrics("cache_config", enable_prefix_caching=None)),
             bench(run_config(shared_prefix_len=1024), levels("server", prefix_cache_hit_rate=0.02))),
        case("negative_low_hit_no_shared_prefix", "Low hit rate on traffic with no shared prefix is expected",
             PASSES, snapshot(), bench(run_config(shared_prefix_len=0), levels("server", prefix_cache_hit_rate=0.01))),
        case("negative_hitting", "Shared prefix and a 62% hit rate", PASSES, snapshot(), bench()),
        case("negative_v1_default_not_disabled", "A 'default' false from the probe is overruled by the "
             "version: vLLM 0.18 caches prefixes unless told not to", PASSES,
             snapshot(cfg(enable_prefix_caching=False), cfg("sources", enable_prefix_caching="default"),
                      metrics("cache_config", enable_prefix_caching=None)), bench()),
    ]
