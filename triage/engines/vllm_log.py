"""What vLLM's log states beyond its start-up phases (triage/engines/log_facts.py): each form is the format string
at the cited source line (the ledger claim). V0 (up to 0.7, and beside V1 until its removal) and V1 (the default
from 0.8) word some facts differently, so from 0.8 both forms are read. A form may be a leading or shared part of
the engine's string."""
from __future__ import annotations

from triage.engines.base import LogForm

_V0_KV_TOO_SMALL = ("The model's max seq len ({max_model_len}) is larger than the maximum number of tokens that can "
                    "be stored in KV cache ({max_seq_len}). Try increasing `gpu_memory_utilization` or decreasing "
                    "`max_model_len` when initializing the engine.")
_V1_KV_TOO_SMALL = ("To serve at least one request with the models's max seq len ({max_model_len}), "
                    "({needed_memory/GiB_bytes:.2f} GiB KV cache is needed, which is larger than the available KV "
                    "cache memory ({available_memory/GiB_bytes:.2f} GiB).")
_V1_KV_TOO_SMALL_0_33 = ("To serve at least one request with the model's max seq len ({max_model_len}), "
                         "({format_gib(needed_memory)} GiB KV cache is needed, which is larger than the available KV "
                         "cache memory ({format_gib(available_memory)} GiB).")
_NO_CACHE = ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
             "the engine")
_V0_STATS = ("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
             "Swapped: %d reqs, Pending: %d reqs")
_V1_STATS = ("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
             "Waiting: %d reqs")
_V0_PREEMPTED = ("Sequence group %s is preempted by %s mode because there is not enough KV cache space. This can "
                 "affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to "
                 "provide more KV cache memory. total_num_cumulative_preemption=%d")
_V0_STATS_FIELDS = ("prompt_tokens_per_s", "generation_tokens_per_s", "running", "swapped", "waiting")
_V1_STATS_FIELDS = ("prompt_tokens_per_s", "generation_tokens_per_s", "running", "waiting")
_V1_CONFIG = "Initializing a V1 LLM engine (v%s) with config: %s"
_V0_CONFIG = "Initializing an LLM engine (v%s) with config: %s, use_cached_outputs=%s"
_V0_BUDGET = ("the current vLLM instance can use total_gpu_memory ({(total_gpu_memory / GiB_bytes):.2f}GiB) x "
              "gpu_memory_utilization ({self.cache_config.gpu_memory_utilization:.2f})")
_V1_BUDGET = ("Free memory on device ({GiB(self.init_snapshot.free_memory)}/{GiB(self.init_snapshot.total_memory)} "
              "GiB) on startup. Desired GPU memory utilization is ({self.cache_config.gpu_memory_utilization},")
_V1_BUDGET_0_33 = ("Free memory on device ({format_gib(self.init_snapshot.free_memory)}/"
                   "{format_gib(self.init_snapshot.total_memory)} GiB) on startup. Desired GPU memory utilization is "
                   "({self.cache_config.gpu_memory_utilization},")
# Where 0.10.2 and 0.33.0 word a fact differently, the form is the part both share ("KV cache size: %s tokens" of
# "GPU KV cache size: ..." and "%s KV cache size: ..."), cited at both ends.
LOG_FACTS = {
    "start": (LogForm(None, "vLLM API server version %s", "vllm.api-server-version-log-0.14", ("version_text",)),
              LogForm("0.15.0", "vLLM server version %s, serving model %s", "vllm.server-version-log-0.15",
                      ("version_text", "model_text")),
              LogForm("0.15.0", "█ ▀▄▀ █", "vllm.startup-logo-0.15")),
    "config": (LogForm(None, _V0_CONFIG, "vllm.log-engine-config-0.6", ("version_text", "config_text")),
               LogForm("0.8.0", _V0_CONFIG, "vllm.log-engine-config-0.6", ("version_text", "config_text")),
               LogForm("0.8.0", _V1_CONFIG, "vllm.log-engine-config-0.10", ("version_text", "config_text")),
               LogForm("0.8.0", _V1_CONFIG, "vllm.log-engine-config", ("version_text", "config_text"))),
    "kv_below_max_len": (LogForm(None, _V0_KV_TOO_SMALL, "vllm.log-kv-too-small-0.6", ("max_model_len", "kv_tokens")),
                         LogForm("0.8.0", _V0_KV_TOO_SMALL, "vllm.log-kv-too-small-0.6",
                                 ("max_model_len", "kv_tokens")),
                         LogForm("0.8.0", _V1_KV_TOO_SMALL, "vllm.log-kv-too-small-0.10",
                                 ("max_model_len", "kv_needed_gib", "kv_available_gib")),
                         LogForm("0.8.0", _V1_KV_TOO_SMALL_0_33, "vllm.log-kv-too-small",
                                 ("max_model_len", "kv_needed_gib", "kv_available_gib"))),
    "kv_estimated_max_len": (LogForm("0.8.0", "Based on the available memory, the estimated maximum model length is "
                                              "{estimated_max_len}.", "vllm.log-kv-too-small-estimate-0.10",
                                     ("estimated_max_len",)),),
    "no_cache_memory": (LogForm(None, _NO_CACHE, "vllm.log-no-cache-memory-0.6"),
                        LogForm("0.8.0", _NO_CACHE, "vllm.log-no-cache-memory-0.10"),
                        LogForm("0.8.0", _NO_CACHE, "vllm.log-no-cache-memory")),
    "gpu_blocks": (LogForm(None, "# GPU blocks: %d, # CPU blocks: %d", "vllm.log-gpu-blocks-0.6",
                           ("gpu_blocks", "cpu_blocks")),),
    "kv_tokens": (LogForm("0.8.0", "KV cache size: %s tokens", "vllm.log-kv-tokens-0.10", ("kv_tokens",)),
                  LogForm("0.8.0", "KV cache size: %s tokens", "vllm.log-kv-tokens", ("kv_tokens",))),
    "max_concurrency": (LogForm(None, "Maximum concurrency for %s tokens per request: %.2fx",
                                "vllm.log-max-concurrency-0.6", ("tokens_per_request", "concurrency")),
                        LogForm("0.8.0", "Maximum concurrency for %s tokens per request: %.2fx",
                                "vllm.log-max-concurrency-0.10", ("tokens_per_request", "concurrency")),
                        LogForm("0.8.0", "Maximum concurrency for %s tokens per request: %.2fx",
                                "vllm.log-kv-tokens", ("tokens_per_request", "concurrency"))),
    # The periodic stats line: running and waiting, then the KV usage (its own fragment from 0.33: "%s KV cache
    # usage"), then from 0.33 the preemptions of the interval.
    "stats": (LogForm(None, _V0_STATS, "vllm.log-stats-0.6", _V0_STATS_FIELDS),
              LogForm("0.8.0", _V0_STATS, "vllm.log-stats-0.6", _V0_STATS_FIELDS),
              LogForm("0.8.0", _V1_STATS, "vllm.log-stats-0.10", _V1_STATS_FIELDS),
              LogForm("0.8.0", _V1_STATS, "vllm.log-stats-base", _V1_STATS_FIELDS)),
    "stats_kv_usage_pct": (LogForm(None, "KV cache usage: %.1f%%", "vllm.log-stats-0.6", ("kv_usage_pct",)),
                           LogForm("0.8.0", "KV cache usage: %.1f%%", "vllm.log-stats-0.10", ("kv_usage_pct",)),
                           LogForm("0.8.0", "KV cache usage: %.1f%%", "vllm.log-stats-kv-usage", ("kv_usage_pct",))),
    "stats_preemptions": (LogForm("0.8.0", "Preemptions: %d", "vllm.log-stats-preemptions", ("preemptions",)),),
    # What the memory profile states: the GPU's total memory and the share vLLM was given (V0: "total_gpu_memory
    # (X GiB) x gpu_memory_utilization (Y)"; V1: "Free memory on device (F/T GiB) on startup. Desired GPU memory
    # utilization is (Y, Z GiB)", logged after graph capture).
    "memory_budget": (LogForm(None, _V0_BUDGET, "vllm.log-memory-profile-0.6", ("total_gib", "gpu_memory_utilization")),
                      LogForm("0.8.0", _V0_BUDGET, "vllm.log-memory-profile-0.6",
                              ("total_gib", "gpu_memory_utilization")),
                      LogForm("0.8.0", _V1_BUDGET, "vllm.log-memory-profile-0.10",
                              ("free_gib", "total_gib", "gpu_memory_utilization")),
                      LogForm("0.8.0", _V1_BUDGET_0_33, "vllm.log-memory-profile",
                              ("free_gib", "total_gib", "gpu_memory_utilization")),
                      # From 0.20 (CUDA-graph memory profiled by default: claim vllm.cudagraph-memory-in-budget),
                      # before the capture.
                      LogForm("0.8.0", "The current --gpu-memory-utilization=%.4f is equivalent to",
                              "vllm.log-cudagraph-profiling-enabled", ("gpu_memory_utilization",))),
    # V1's sampler warm-up runs min(max_num_seqs, max_num_batched_tokens) dummy requests after graph capture.
    "oom.warmup": (LogForm("0.8.0", "CUDA out of memory occurred when warming up sampler with {num_reqs} dummy "
                                    "requests.", "vllm.sampler-warmup-max-num-seqs-0.10", ("dummy_requests",)),),
    # V0 warns on the first preemption and then every 50th, with the running total; V1 logs no line per
    # preemption (claim vllm.no-preemption-log-0.10).
    "preemption": (LogForm(None, _V0_PREEMPTED, "vllm.log-preempted-0.6", ("request_text", "mode_text", "total")),
                   LogForm("0.8.0", _V0_PREEMPTED, "vllm.log-preempted-0.6", ("request_text", "mode_text", "total"))),
}
# The config line's keys that are not the flag's name with dashes (`max_seq_len=` is --max-model-len).
LOG_CONFIG_KEYS = {"max_seq_len": "--max-model-len", "chunked_prefill_enabled": "--enable-chunked-prefill"}
