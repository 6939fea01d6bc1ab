"""vLLM incidents (V0 and V1), each from a public thread: its figures in vLLM's own format strings."""
from __future__ import annotations

from tests.incidents.build import Incident, fill, vllm0, vllm1

V0_CONFIG = ("model='{m}', speculative_config=None, tokenizer='{m}', skip_tokenizer_init=False, tokenizer_mode=auto, "
             "revision=None, override_neuron_config=None, tokenizer_revision=None, trust_remote_code=False, "
             "dtype=torch.bfloat16, max_seq_len={n}, download_dir=None, load_format=LoadFormat.AUTO, "
             "tensor_parallel_size={tp}, pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=None, "
             "enforce_eager=False, kv_cache_dtype=auto, quantization_param_path=None, device_config=cuda, "
             "served_model_name={m}, enable_prefix_caching=False, chunked_prefill_enabled=False")


def _v0_start(version: str, model: str, max_len: int, tp: int = 1, t: str = "11-21 15:07:28") -> list[str]:
    return [vllm0(t, "api_server.py:585") + f"vLLM API server version {version}",
            vllm0(t, "llm_engine.py:234") + fill("vllm.log-engine-config-0.6", version,
                                                 V0_CONFIG.format(m=model, n=max_len, tp=tp), True)]


def _kv_below_v0(name: str, url: str, version: str | None, max_len: int, kv: int, cause: str, cap: int,
                 blocks: int | None = None) -> Incident:
    lines = _v0_start(version or "0.6.6", "meta-llama/Llama-3.1-8B-Instruct", max_len)
    if blocks is not None:
        lines.append(vllm0("11-21 15:08:44", "gpu_executor.py:76") + fill("vllm.log-gpu-blocks-0.6", blocks, 2048))
    lines += ["Traceback (most recent call last):",
              "ValueError: " + fill("vllm.log-kv-too-small-0.6", max_len, kv)]
    return Incident(name, url, "vllm", version, cause, tuple(lines), "KV007", (f"--max-model-len {cap}",),
                    severity="critical", note="" if version else "The thread names no version: the start lines "
                    "are written as 0.6.6 prints them.")


def _kv_below() -> list[Incident]:
    return [
        _kv_below_v0("vllm-v0-kv-below-max-len-10517", "https://github.com/vllm-project/vllm/issues/10517", None,
                     29000, 23648, "29000 tokens did not fit the 23648-token KV cache left on a 24 GB RTX 3090; "
                     "20000 or chunked prefill fit", 23552, blocks=1478),
        _kv_below_v0("vllm-v0-kv-below-max-len-7526", "https://github.com/vllm-project/vllm/issues/7526", None,
                     30000, 3984, "below 32k chunked prefill was off, so the profiled prefill of 30000 tokens left "
                     "3984 tokens of KV", 3840),
        _kv_below_v0("vllm-v0-kv-below-max-len-11391", "https://github.com/vllm-project/vllm/issues/11391", None,
                     56000, 43328, "the KV cache holds what memory remains after weights and activations; a "
                     "smaller --max-model-len solved it", 43264),
        _kv_below_v0("vllm-v0-kv-below-max-len-api225", "https://github.com/xusenlinzy/api-for-open-llm/issues/225",
                     None, 8192, 4512, "the model's default 8192-token context did not fit; 4096 did", 4352),
        Incident("vllm-v1-kv-below-max-len-tpu223", "https://github.com/vllm-project/tpu-inference/pull/223", "vllm",
                 "0.10.2", "the model's default 131072-token context needs 16 GiB of KV; 0.71 GiB was left",
                 (vllm1("08-01 10:00:00", "core.py:76", proc="EngineCore_0 pid=316")
                  + fill("vllm.log-engine-config-0.10", "0.10.2", "model='meta-llama/Llama-3.1-8B', max_seq_len=131072, "
                         "tensor_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto"),
                  "ValueError: " + fill("vllm.log-kv-too-small-0.10", 131072, 16.0, 0.71,
                                        fill("vllm.log-kv-too-small-estimate-0.10", 5632))),
                 "KV007", ("--max-model-len 5632",), severity="critical",
                 note="The thread's engine is vLLM's TPU backend; the line is the same V1 check (0.10.2 wording)."),
        Incident("vllm-v1-kv-below-max-len-arc4",
                 "https://github.com/SergiioB/intel-arc-pro-b70-inference-cookbook/issues/4", "vllm", "0.33.0",
                 "the KV cache left (4.25 GiB) was 10 MiB short of one 100000-token request (4.26 GiB)",
                 (vllm1("06-02 09:00:00", "core.py:139", proc="EngineCore pid=316")
                  + fill("vllm.log-engine-config", "0.33.0", "model='Qwen/Qwen3-8B', max_seq_len=100000, "
                         "tensor_parallel_size=1"),
                  "(EngineCore pid=316) ValueError: " + fill("vllm.log-kv-too-small", 100000, "4.26", "4.25", "")),
                 "KV007", ("--max-model-len 99584",), severity="critical",
                 note="The thread's line was cut after the GiB figures: the estimate line is left out, so triage "
                      "derives the tokens that fit from the two GiB figures."),
    ]


def _no_cache() -> list[Incident]:
    budget = fill("vllm.log-memory-profile-0.6", 3.25, 8.00, 0.70, 5.60, 5.20, 0.03, 1.42, -1.05)
    return [
        Incident("vllm-v0-no-cache-memory-10439", "https://github.com/vllm-project/vllm/issues/10439", "vllm",
                 "0.6.4.post1", "gpu_memory_utilization (0.03 to 0.4 tried) left no room for the KV cache after the "
                 "weights; a maintainer suggested 0.5 to 0.6",
                 (*_v0_start("0.6.4.post1", "Qwen/Qwen2.5-0.5B-Instruct", 32768),
                  "ValueError: " + fill("vllm.log-no-cache-memory-0.6")),
                 "ENG010", (), text_contains=("--gpu-memory-utilization",), severity="critical"),
        Incident("vllm-v0-no-cache-memory-13882", "https://github.com/vllm-project/vllm/issues/13882", "vllm", None,
                 "weights (5.20 GiB) and activations (1.42 GiB) exceeded the 5.60 GiB budget (8 GiB x 0.70)",
                 (*_v0_start("0.6.6", "Qwen/Qwen2.5-7B", 4096, t="02-26 09:53:50"),
                  vllm0("02-26 09:54:02", "model_runner.py:1099") + fill("vllm.log-load-took-0.6", 5.2032),
                  *[vllm0("02-26 09:54:05", "worker.py:241") + part for part in budget.split("\n")],
                  "ValueError: " + fill("vllm.log-no-cache-memory-0.6")),
                 "ENG010", ("--gpu-memory-utilization 0.75",), severity="critical",
                 note="The thread's version is not stated; its lines are 0.6's wording."),
        Incident("vllm-v0-no-cache-memory-qanything302", "https://github.com/netease-youdao/QAnything/issues/302",
                 "vllm", None, "no GPU blocks were left for the KV cache (no fix established in the thread)",
                 (vllm0("04-27 10:13:05", "llm_engine.py:275") + fill("vllm.log-gpu-blocks-0.6", 0, 256),
                  "ValueError: " + fill("vllm.log-no-cache-memory-0.6")),
                 "ENG010", (), text_contains=("no memory was left for the kv cache",), severity="critical"),
    ]


def _oom() -> list[Incident]:
    return [
        Incident("vllm-v1-graph-oom-57475", "https://github.com/vllm-project/vllm/issues/57475", "vllm", "0.29.1",
                 "at --gpu-memory-utilization 0.98 the CUDA-graph capture had no headroom; 0.97 started",
                 (vllm1("10-02 12:00:00", "core.py:139") + fill("vllm.log-engine-config", "0.29.1",
                                                               "model='Qwen/Qwen3.8-27B-NVFP4', max_seq_len=124000"),
                  vllm1("10-02 12:01:10", "gpu_worker.py:787") + fill("vllm.log-cudagraph-profiling-enabled", 0.98,
                                                                      0.9594, 1.0006),
                  vllm1("10-02 12:01:12", "gpu_worker.py:642") + fill("vllm.log-kv-0.10", 2.97),
                  vllm1("10-02 12:01:12", "kv_cache_utils.py:1147") + fill("vllm.log-kv-tokens", "GPU", "150,745",
                                                                          "124,000", 1.22),
                  "torch.OutOfMemoryError: " + fill("runtime.torch-oom-2.1", "136.00 MiB", 0, "22.36 GiB",
                                                    "120.88 MiB", "", "21.10 GiB", "0.31 GiB")),
                 "ENG010", ("--gpu-memory-utilization 0.93", "--enforce-eager"), severity="critical",
                 text_contains=("cuda_graph",),
                 note="The thread ran 0.29.1rc1; its lines are written in 0.33.0's wording, the nearest read."),
        Incident("vllm-graph-oom-15598", "https://github.com/vllm-project/vllm/issues/15598", "vllm", None,
                 "CUDA graphs take extra memory; --enforce-eager (or fewer sequences) avoided the OOM",
                 (vllm1("03-27 08:00:00", "gpu_model_runner.py:1273") + fill("vllm.log-load-took-0.10", 14.9917, 8.123),
                  vllm1("03-27 08:00:30", "gpu_worker.py:218") + fill("vllm.log-kv-0.10", 22.10),
                  "torch.OutOfMemoryError: " + fill("runtime.torch-oom-2.1", "2.00 MiB", 6, "44.53 GiB", "448.00 KiB",
                                                    "", "43.10 GiB", "0.51 GiB")),
                 "ENG010", ("--enforce-eager",), severity="critical", text_contains=("cuda_graph",),
                 note="The thread states the allocation, total and free figures; the model-load and KV lines are "
                      "the V1 lines that precede a capture, their figures not from the thread."),
        Incident("vllm-v1-sampler-warmup-oom-14452", "https://github.com/vllm-project/vllm/issues/14452", "vllm",
                 "0.10.2", "the sampler warm-up with max_num_seqs=1024 dummy requests ran out of memory",
                 (vllm1("03-16 06:12:38", "multiproc_executor.py:375", "ERROR", proc="VllmWorker rank=7 pid=10948")
                  + "RuntimeError: " + fill("vllm.sampler-warmup-max-num-seqs-0.10", 1024),),
                 "ENG010", ("--max-num-seqs 512",), severity="critical", text_contains=("warmup",)),
    ]


def _serving() -> list[Incident]:
    stats = [vllm0(f"10-28 11:16:{s:02d}", "metrics.py:349") + fill("vllm.log-stats-0.6", 0.0, g, 2, 0, 98, kv, 0.0)
             for s, g, kv in ((29, 7301.2, 61.5), (34, 7220.5, 73.8), (39, 7154.5, 86.1))]
    full = [vllm0(f"02-01 06:36:{s:02d}", "metrics.py:349") + fill("vllm.log-stats-0.6", 382.6, 118.5, 35, 0, 115,
                                                                   kv, 0.0)
            for s, kv in ((0, 97.5), (5, 99.0))]
    pre = "Sequence group {} is preempted by PreemptionMode.RECOMPUTE mode because"
    return [
        Incident("vllm-v0-preemption-limo29", "https://github.com/GAIR-NLP/LIMO/issues/29", "vllm", None,
                 "not enough KV cache for the 32B model's evaluation: raise gpu_memory_utilization or "
                 "tensor_parallel_size",
                 (*_v0_start("0.6.6", "GAIR/LIMO", 32768, t="02-10 10:00:00"),
                  *[vllm0(f"02-10 10:{m:02d}:00", "scheduler.py:1555", "WARNING")
                    + fill("vllm.log-preempted-0.6", rid, "PreemptionMode.RECOMPUTE", n)
                    for m, rid, n in ((10, 17, 1), (12, 140, 51), (14, 221, 101))]),
                 "KV002", ("--gpu-memory-utilization",), quiet=("KV001",),
                 note="The thread shows the 101st preemption; the 1st and 51st (vLLM warns every 50th) and the times "
                      "are written around it. " + pre.format(221) + " is its line."),
        Incident("vllm-v0-preemption-swap-546", "https://github.com/vllm-project/vllm/issues/546", "vllm", "0.6.3",
                 "the KV cache ran out and sequences were preempted by swapping (n>1 sequences per request)",
                 (*_v0_start("0.6.3", "meta-llama/Llama-2-7b-hf", 4096, t="10-28 11:10:00"), *stats,
                  vllm0("10-28 11:16:41", "scheduler.py:1555", "WARNING")
                  + fill("vllm.log-preempted-0.6", "chat-7e630abf1a8b4c8a88775b1e98a54cf2", "PreemptionMode.SWAP", 1)),
                 "KV002", ("--gpu-memory-utilization",)),
        Incident("vllm-v0-kv-saturated-2731", "https://github.com/vllm-project/vllm/issues/2731", "vllm", None,
                 "under load the KV cache stood at 99% with 115 requests pending",
                 (*_v0_start("0.6.6", "meta-llama/Llama-2-13b-chat-hf", 4096, t="02-01 06:30:00"), *full),
                 "KV001", ("--gpu-memory-utilization",),
                 note="The thread ran an older vLLM whose stats line also printed iteration times; the figures are "
                      "written in 0.6's stats line."),
    ]


def incidents() -> list[Incident]:
    return [*_kv_below(), *_no_cache(), *_oom(), *_serving()]
