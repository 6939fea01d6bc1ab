"""ENG010, start-up out of memory (rules/catalog/eng010_startup_out_of_memory.py): its fixture cases, one per
phase. The figures are those of the incidents in tests/incidents/ (vLLM 57475, 14452; TGI 1067)."""
from __future__ import annotations

from tests.rule_cases._build import FIRES, PASSES, Case, case, cfg, logs, snapshot

CODE = "ENG010"


def _oom(phase: str, **typed) -> dict:
    return {"fact": "oom", "phase": phase, "path": "server.log", "line_no": 40, "alloc_bytes": 136 * 2**20,
            "gpu_total_bytes": 22.36 * 2**30, "free_bytes": 120.88 * 2**20, "claim": "runtime.torch-oom-2.1",
            "line": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 136.00 MiB. GPU 0 has a total "
                    "capacity of 22.36 GiB of which 120.88 MiB is free.", **typed}


def cases() -> list[Case]:
    v = cfg(engine_version="0.29.1", gpu_memory_utilization=0.98)
    return [
        case("positive_cuda_graph", "vLLM at 0.98 ran out of memory capturing CUDA graphs",
             {**FIRES, "severity": "critical", "commands": ["--gpu-memory-utilization 0.93", "--enforce-eager"],
              "evidence_keys": ["logs.oom.phase", "logs.oom.at"]},
             snapshot(logs(engine="vllm", events=(_oom("cuda_graph"),)), v)),
        case("positive_sampler_warmup", "vLLM's sampler warm-up over 1024 dummy requests ran out of memory",
             {**FIRES, "commands": ["--max-num-seqs 512"]},
             snapshot(logs(engine="vllm", events=(_oom("warmup", sequences=1024),)), cfg(engine_version="0.10.2"))),
        case("positive_tgi_prefill_warmup", "TGI's warm-up prefill of 4096 tokens did not fit",
             {**FIRES, "commands": ["--max-batch-prefill-tokens 2048"]},
             snapshot(logs(engine="tgi", events=({"fact": "startup_failure", "phase": "warmup", "batch_tokens": 4096,
                                                   "line": "Not enough memory to handle 4096 prefill tokens.",
                                                   "claim": "tgi.log-prefill-oom"},)),
                      cfg(engine="tgi", engine_version="3.3.7"))),
        case("positive_weights_on_one_gpu", "The weights alone did not fit, on a host with one GPU: no TP offered",
             {**FIRES, "text_contains": ["too few to split the weights"]},
             snapshot(logs(engine="vllm", events=(_oom("weight_load"),)), cfg(engine_version="0.10.2"))),
        case("positive_serving_is_high", "Out of memory while serving: high, not critical",
             {**FIRES, "severity": "high", "commands": ["--max-num-seqs 128"]},
             snapshot(logs(engine="vllm", events=(_oom("serving"),)), cfg(engine_version="0.10.2", max_num_seqs=256))),
        case("negative_no_memory_error", "A log with no memory error", PASSES,
             snapshot(logs(engine="vllm", engine_version="0.10.2"))),
    ]
