"""What Ollama's log states (triage/engines/log_facts.py): each form is the string at the cited source line of
ollama/ollama (the ledger claim), at v0.5.13 and v0.32.15. Ollama logs with Go's slog (`msg=... key=value`), and
passes on its runner's output, so llama.cpp's own lines (its layers offloaded) appear in it too. Up to 0.5 its
`offload` line states the layers it put on the GPU and the memory that needed; v0.32 runs llama-server and no
longer logs that estimate."""
from __future__ import annotations

from triage.engines.base import LogForm
from triage.engines.llamacpp_log import CUDA_DEVICES, OFFLOADED

LOG_FACTS = {
    "start": (LogForm(None, "Listening on %s (version %s)", "ollama.log-listening-0.5", ("address_text", "version_text")),
              LogForm(None, "Listening on %s (version %s)", "ollama.log-listening", ("address_text", "version_text"))),
    # Its runner's start: up to 0.5 "llama runner started", from 0.32 a llama-server it launches.
    "runner": (LogForm(None, "llama runner started in %0.2f seconds", "ollama.log-runner-started-0.5", ("seconds",)),
               LogForm(None, "llama-server started in %0.2f seconds", "ollama.log-llama-server-started", ("seconds",)),
               LogForm(None, "starting llama-server", "ollama.log-starting-llama-server")),
    "config": (LogForm(None, "server config", "ollama.log-server-config-0.5"),
               LogForm(None, "server config", "ollama.log-server-config")),
    # slog renders the keys of the `offload` line (llm/memory.go) as layers.model=N layers.offload=N.
    "offload": (LogForm(None, "layers.model=%d layers.offload=%d", "ollama.log-offload-keys-0.5", ("total", "on_gpu")),
                OFFLOADED),
    "gpu_devices": (CUDA_DEVICES,),
    # The same line's memory estimate: what the GPUs offer, and what all layers with this context would need.
    "offload_available": (LogForm(None, 'memory.available="[%s]"', "ollama.log-offload-keys-0.5",
                                  ("available_text",)),),
    "offload_required": (LogForm(None, 'memory.required.full="%s"', "ollama.log-offload-keys-0.5",
                                 ("required_text",)),),
    "offload_kv": (LogForm(None, 'memory.required.kv="%s"', "ollama.log-offload-keys-0.5", ("kv_text",)),),
}
