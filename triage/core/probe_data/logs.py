"""The log probes: `logs` (probes/logs.py, the server log given with --log) and `kernel_log`
(probes/kernel_log.py, NVIDIA Xid events)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data.base import Payload, payload


@payload
class StartupPhase:
    phase: str | None = None                         # process, download, weight_load, compile, cuda_graph, kv_alloc, warmup, api_server
    label: str | None = None
    seconds: float | None = None                     # as the engine logged it, else between its lines
    logged: bool | None = None                       # seconds from the engine's own line
    bytes: int | None = None                         # weights (load, download) or KV (kv_alloc) bytes the line gives
    bandwidth_bytes_per_s: float | None = None       # weight download and load: bytes / seconds
    started_at_s: float | None = None                # since the log's first stamped line (coldstart: the launch)
    ended_at_s: float | None = None
    completed: bool | None = None
    line: str | None = None                          # the line that ended it


@payload
class StartupData:
    engine: str | None = None                        # whose start-up markers matched (triage/engines/*.py)
    num_starts: int | None = None                    # starts seen in the log (a restart opens a new one)
    phases: tuple[StartupPhase, ...] = ()            # of the last start, in the order the log shows them
    ready_s: float | None = None                     # to the API server's ready line
    phases_total_s: float | None = None
    compile_s_each_start: tuple[float, ...] = ()     # torch.compile seconds of each start, oldest first
    cuda_graph_s_each_start: tuple[float, ...] = ()
    download_s_each_start: tuple[float, ...] = ()
    start_gaps_s: tuple[float, ...] = ()             # each start to the next: how long each replica ran, oldest first


@payload
class LogEvent:
    fact: str | None = None                          # kv_below_max_len, no_cache_memory, startup_failure, oom, preemption,
                                                     # retraction, nccl_warn, nccl_error, nccl_timeout, offload
    phase: str | None = None                         # the start-up phase it struck in (startup PHASES), or serving
    values: dict[str, float] | None = None           # its numbers, named by the engine's format string
    texts: dict[str, str] | None = None              # its text fields (redacted)
    # The numbers rules judge, typed (None: the line does not state it):
    max_model_len: int | None = None                 # kv_below_max_len: the configured maximum length
    kv_tokens: int | None = None                     # ... the tokens the cache holds (V0's figure, or V1's estimate)
    kv_needed_gib: float | None = None               # ... V1: KV one max-length request needs, and what was left
    kv_available_gib: float | None = None
    batch_tokens: int | None = None                  # a warm-up batch that did not fit (TGI's prefill tokens)
    sequences: int | None = None                     # a warm-up over this many sequences (vLLM's sampler)
    alloc_bytes: float | None = None                 # oom: the allocation that failed, the GPU's total and free
    gpu_total_bytes: float | None = None
    free_bytes: float | None = None
    path: str | None = None                          # the file it was read from (several may be given)
    line_no: int | None = None                       # in that file
    at_s: float | None = None                        # the line's own time stamp (seconds on the log's scale)
    line: str | None = None                          # redacted
    claim: str | None = None                         # the ledger claim of the format string it matched


@payload
class LogStatsSample:
    """One of the engine's periodic stats lines (vLLM's throughput line, SGLang's decode-batch line)."""
    at_s: float | None = None
    line_no: int | None = None
    num_requests_running: float | None = None
    num_requests_waiting: float | None = None
    kv_cache_usage_frac: float | None = None
    generation_tokens_per_s: float | None = None


@payload
class LogsData(Payload):
    """The server log given with `--log FILE`: only its last 64 MiB are read, and kept lines are
    redacted. Status `unsupported` without `--log`."""

    PROBE = "logs"

    path: str | None = None
    truncated: bool | None = None                    # only the last 64 MiB were read
    num_lines: int | None = None
    slow_tokenizer: bool | None = None
    num_preemption_lines: int | None = None
    preemption_examples: tuple[str, ...] = ()        # redacted
    kv_cache_tokens: int | None = None
    num_gpu_blocks: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    cuda_graph_hints: tuple[str, ...] = ()
    num_nccl_errors: int | None = None
    num_shm_broadcast_stalls: int | None = None
    num_shm_broadcast_stalls_startup: int | None = None  # of those, between vLLM's startup and ready lines
    num_oom_lines: int | None = None
    weights_download_s: float | None = None         # the longest "Time spent downloading weights" vLLM logged
    startup: StartupData | None = None               # the server's start-up phases (triage/engines/startup_log.py)
    # What the log states in the engine's own words (triage/engines/log_read.py), of its last start:
    source: str | None = None                        # "--log" (beside a live server) | "--from" (the log alone)
    engine: str | None = None                        # whose lines it holds
    engine_version: str | None = None                # from its banner or config line
    first_line_no: int | None = None                 # the last start's lines in the (last) file
    last_line_no: int | None = None
    num_restarts: int | None = None                  # starts before the last one
    config: dict[str, Any] | None = None             # server_config fields from the config line (redacted)
    events: tuple[LogEvent, ...] = ()                # at most 20 per fact, oldest first
    event_counts: dict[str, int] | None = None       # every event per fact, of the last start
    preemptions_total: float | None = None           # the engine's own count (vLLM's cumulative number), else lines
    preemptions_per_s: float | None = None           # over the serving span the log's time stamps give
    serving_span_s: float | None = None
    stats: tuple[LogStatsSample, ...] = ()           # the periodic stats lines, at most 200 spread over the log
    gpu_layers_offloaded: int | None = None          # llama.cpp / Ollama: layers on the GPU
    gpu_layers_total: int | None = None
    gpu_total_bytes: float | None = None             # from a CUDA out-of-memory line ("total capacity of ...")
    gpu_devices: int | None = None                   # llama.cpp / Ollama: CUDA devices its backend found
    offload_available_bytes: float | None = None     # Ollama's offload line: GPU memory it could use (all GPUs)
    offload_required_bytes: float | None = None      # ... and what every layer with this context would need
    offload_kv_bytes: float | None = None            # ... of which the KV cache for this context


@payload
class XidEvent:
    xid: int | None = None
    pci_bus_id: str | None = None
    meaning: str | None = None
    age_s: float | None = None                       # None for a saved file or a line without a stamp
    line: str | None = None                          # redacted


@payload
class KernelLogData(Payload):
    """NVIDIA Xid events from `dmesg`, `/dev/kmsg` or a saved `--kernel-log` file. Status
    `permission_denied` when neither dmesg nor /dev/kmsg can be read (kernel.dmesg_restrict)."""

    PROBE = "kernel_log"

    source: str | None = None                        # "dmesg" | "/dev/kmsg" | the --kernel-log file
    num_lines_read: int | None = None
    num_xid_events: int | None = None
    xid_counts: dict[str, int] | None = None
    xid_events: tuple[XidEvent, ...] = ()            # the last 100
    newest_xid_age_s: float | None = None
