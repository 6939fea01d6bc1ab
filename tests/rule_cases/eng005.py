"""ENG005, engine outdated (rules/catalog/eng005_engine_outdated.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    cfg,
    gpu0,
    metrics,
    process,
    snapshot,
)

CODE = "ENG005"


def cases() -> list[Case]:
    return [
        case("positive_v0", "vLLM 0.6.3 (V0 engine), healthy: an opportunity", {**FIRES, "severity": "low"},
             snapshot(cfg(engine_version="0.6.3"))),
        case("positive_v0_preempting", "vLLM 0.6.3 (V0 engine) preempting: the V1 scheduler is the fix",
             {**FIRES, "severity": "medium", "evidence_keys": ["server_metrics.num_preemptions_delta"]},
             snapshot(cfg(engine_version="0.6.3"), metrics(num_preemptions_delta=37, preemptions_per_s=7.4))),
        case("positive_pre_fa4_on_sm100_flash_attn_chosen", "vLLM 0.11 on a B200 (SM100) started with "
             "--attention-backend FLASH_ATTN: FA4 comes with 0.17",
             {**FIRES, "severity": "low", "text_contains": ["FlashAttention 4 on Blackwell SM100", "from vLLM 0.17"]},
             snapshot(cfg(engine_version="0.11.0"), gpu0(name="NVIDIA B200", compute_capability=(10, 0)),
                      process(cmdline=("vllm", "serve", "m", "--attention-backend", "FLASH_ATTN")))),
        case("negative_pre_fa4_on_sm100_default_backend", "vLLM 0.11 on a B200 with the default backend: "
             "SM100 defaults to FlashInfer, so FA4 is no reason to upgrade", PASSES,
             snapshot(cfg(engine_version="0.11.0"), gpu0(name="NVIDIA B200", compute_capability=(10, 0)))),
        case("positive_tgi_2_2", "TGI 2.2: no prefix caching by default (2.3) nor prefill chunking (3.0)",
             {**FIRES, "text_contains": ["prefix caching on by default from TGI 2.3",
                                         "prefill chunking on by default from TGI 3.0"]},
             snapshot(cfg(engine="tgi", engine_version="2.2.0"))),
        case("negative_tgi_3", "TGI 3.3.7", PASSES,
             snapshot(cfg(engine="tgi", engine_version="3.3.7"))),
        case("negative_v1_on_hopper", "vLLM 0.11 on an H100 already picks FA3 (since 0.8): quiet", PASSES,
             snapshot(cfg(engine_version="0.11.0"))),
        case("negative_v1_on_ampere", "vLLM 0.10 on an A100: no newer FlashAttention to gain", PASSES,
             snapshot(cfg(engine_version="0.10.2"), gpu0(name="NVIDIA A100-SXM4-80GB", compute_capability=(8, 0)))),
        case("negative_current", "vLLM 0.18.1", PASSES, snapshot()),
    ]
