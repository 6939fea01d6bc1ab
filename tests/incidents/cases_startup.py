"""Starts dominated by compile or graph capture, and healthy starts of every engine that must stay quiet."""
from __future__ import annotations

from tests.incidents.build import Incident, fill, ollama, sglang, tgi, vllm0, vllm1


def capture_incidents() -> list[Incident]:
    return [
        Incident("vllm-graph-capture-hours-16961", "https://github.com/vllm-project/vllm/issues/16961", "vllm", "0.8.4",
                 "with LoRA on the 0.8.4 V1 engine, CUDA-graph capture took 11412 s of an 11630 s start",
                 (vllm0("04-21 19:44:30", "api_server.py:1034") + "vLLM API server version 0.8.4",
                  vllm1("04-21 22:56:58", "gpu_model_runner.py:1608") + fill("vllm.log-graphs", 11412, 1.31),
                  vllm1("04-21 22:58:22", "core.py:162") + "init engine (profile, create kv cache, warmup model) took "
                  "11629.91 seconds"),
                 "ENG011", ("--enforce-eager",), severity="medium"),
        Incident("vllm-compile-half-hour-34399", "https://github.com/vllm-project/vllm/issues/34399", "vllm", "0.15.1",
                 "torch.compile of the Nemotron 3 model took over half an hour of the start",
                 (vllm1("02-12 14:23:00", "api_server.py:1172") + "vLLM server version 0.15.1, serving model "
                  "nvidia/Nemotron-3",
                  vllm1("02-12 15:00:36", "backends.py:319") + "Compiling a graph for compile range (1, 8000) takes "
                  "2219.43 s",
                  vllm1("02-12 15:00:36", "monitor.py:34") + fill("vllm.log-compile", 2222.52)),
                 "ENG011", ("VLLM_CACHE_ROOT",), severity="medium",
                 note="The thread states no version; 'takes' dates the log to 0.17 or before."),
        Incident("vllm-graph-capture-65s-16716", "https://github.com/vllm-project/vllm/issues/16716", "vllm", "0.8.3",
                 "65 s of CUDA-graph capture on every start with LoRA; a responder confirmed it is expected",
                 (vllm0("04-16 10:00:00", "api_server.py:1034") + "vLLM API server version 0.8.3",
                  vllm1("04-16 10:01:30", "gpu_model_runner.py:1608") + fill("vllm.log-graphs", 65, 0.50)),
                 "ENG011", (), severity="low"),
    ]


def _slow_load(name: str, url: str, model: str, gib: float, minutes: float, cause: str) -> Incident:
    start_min = 10
    end = start_min + int(minutes)
    return Incident(name, url, "vllm", None, cause,
                    (vllm0("12-20 09:59:50", "api_server.py:712") + "vLLM API server version 0.6.6",
                     vllm0(f"12-20 {10 + start_min // 60:02d}:{start_min % 60:02d}:00", "model_runner.py:1094")
                     + f"Starting to load model {model}...",
                     vllm0(f"12-20 {10 + end // 60:02d}:{end % 60:02d}:00", "model_runner.py:1099")
                     + fill("vllm.log-load-took-0.6", gib)),
                    "NET006", ("--load-format runai_streamer",), severity="medium",
                    note=f"The thread states the minutes and the model; the GB are a {model.split('/')[-1]} "
                         "checkpoint's in 16 bits, and the lines are 0.6's wording. 0.6 has no fastsafetensors "
                         "(it came in 0.8.2: claim vllm.load-format-fastsafetensors), so the fix is runai_streamer.")


def slow_load_incidents() -> list[Incident]:
    return [
        _slow_load("vllm-slow-weight-load-2233", "https://github.com/vllm-project/vllm/issues/2233",
                   "deepseek-ai/deepseek-llm-67b-chat", 124.8, 120, "the storage medium was the limit: after fixing "
                   "it the 67B model loaded in 3 minutes"),
        _slow_load("vllm-slow-weight-load-2253", "https://github.com/vllm-project/vllm/issues/2253",
                   "baichuan-inc/Baichuan2-7B-Chat", 14.0, 15, "the 'high-speed' hard drive had a problem: "
                   "replaced, the load took 2 minutes"),
    ]


def healthy() -> list[Incident]:
    return [
        Incident("vllm-v0-healthy-11903", "https://github.com/vllm-project/vllm/issues/11903", "vllm", "0.6.6",
                 "a healthy start (35.78 GiB of KV after profiling); the failure was in a client example",
                 (vllm0("01-09 07:32:00", "api_server.py:712") + "vLLM API server version 0.6.6",
                  vllm0("01-09 07:32:01", "model_runner.py:1094") + "Starting to load model Qwen/Qwen2.5-7B-Instruct...",
                  vllm0("01-09 07:32:47", "model_runner.py:1099") + fill("vllm.log-load-took-0.6", 7.5122),
                  *[vllm0("01-09 07:32:55", "worker.py:241") + part for part in
                    fill("vllm.log-memory-profile-0.6", 6.84, 47.54, 0.95, 45.16, 7.51, 0.68, 1.19, 35.78).split("\n")],
                  vllm0("01-09 07:32:55", "gpu_executor.py:76") + fill("vllm.log-gpu-blocks-0.6", 41870, 4681),
                  vllm0("01-09 07:33:10", "api_server.py:643") + fill("vllm.log-api", 0, "http://0.0.0.0:8000"),
                  "INFO:     Application startup complete."),
                 None),
        Incident("vllm-v1-healthy-20264", "https://github.com/vllm-project/vllm/issues/20264", "vllm", "0.9.1",
                 "compile (7.51 s) and capture (17 s) of a 34 s init, with the compile cache reused: expected",
                 (vllm1("06-19 23:04:59", "api_server.py:1287") + "vLLM API server version 0.9.1",
                  vllm1("06-19 23:05:01", "gpu_model_runner.py:1273") + fill("vllm.log-load-took-0.10", 3.4213, 0.902026),
                  vllm1("06-19 23:05:18", "monitor.py:33") + fill("vllm.log-compile", 7.51),
                  vllm1("06-19 23:05:18", "kv_cache_utils.py:578") + fill("vllm.log-kv-tokens-0.10", "613,024"),
                  vllm1("06-19 23:05:18", "kv_cache_utils.py:581") + fill("vllm.log-max-concurrency-0.10", "131,072", 4.68),
                  vllm1("06-19 23:05:35", "gpu_model_runner.py:1608") + fill("vllm.log-graphs", 17, 0.48),
                  vllm1("06-19 23:05:36", "api_server.py:1349") + fill("vllm.log-api", 0, "http://0.0.0.0:8000"),
                  "INFO:     Application startup complete."),
                 None),
        Incident("sglang-healthy-29575", "https://github.com/sgl-project/sglang/issues/29575", "sglang", None,
                 "max_total_num_tokens=2086558 is the KV pool: about 2M tokens, as expected",
                 (sglang("2026-06-28 15:16:45") + fill("sglang.log-max-total-num-tokens-0.4", 2086558, 8192, 16384, 33,
                                                       256000, 17.22),
                  sglang("2026-06-28 15:17:20") + fill("sglang.log-ready")),
                 None),
        Incident("tgi-healthy-2744", "https://github.com/huggingface/text-generation-inference/issues/2744", "tgi", None,
                 "the warm-up succeeded and set the token budgets (the OOM came later, at run time)",
                 (tgi("2024-11-20T10:00:00.000000Z") + "Default `max_batch_prefill_tokens` to 10049",
                  tgi("2024-11-20T10:00:30.000000Z") + fill("tgi.log-warmup"),
                  tgi("2024-11-20T10:00:41.000000Z", target="text_generation_router_v3") + fill("tgi.log-max-batch", 30816)),
                 None),
        Incident("tgi-healthy-1831", "https://github.com/huggingface/text-generation-inference/issues/1831", "tgi",
                 "2.0.0", "the launcher started healthy and set 425472 batch total tokens",
                 (tgi("2024-04-30T10:00:30.000000Z") + fill("tgi.log-warmup"),
                  tgi("2024-04-30T10:00:40.000000Z", target="text_generation_router") + fill("tgi.log-max-batch-2.0",
                                                                                           425472)),
                 None),
        Incident("ollama-healthy-11039", "https://github.com/ollama/ollama/issues/11039", "ollama", None,
                 "all 37 layers on the GPU: the model runs fully there",
                 (ollama("2025-06-12T10:00:00.000Z", "server.go:168") + "msg=" + fill("ollama.log-offload-0.5")
                  + ' library=cuda layers.requested=-1 layers.model=37 layers.offload=37 layers.split="" '
                  'memory.available="[6.8 GiB]" memory.gpu_overhead="0 B" memory.required.full="4.9 GiB" '
                  'memory.required.kv="1.1 GiB"',
                  fill("llamacpp.log-offloaded", "load_tensors", 37, 37)),
                 None),
        Incident("ollama-healthy-13552", "https://github.com/ollama/ollama/issues/13552", "ollama", None,
                 "a healthy start: 41 of 41 layers on the GPU, 4096 context",
                 (fill("llamacpp.log-offloaded", "load_tensors", 41, 41),
                  "load_tensors:        CUDA0 model buffer size =  8354.71 MiB",
                  ollama("2025-12-23T10:34:16.929Z", "server.go:1332") + 'msg="'
                  + fill("ollama.log-runner-started-0.5", 33.87) + '"'),
                 None),
        Incident("llamacpp-healthy-9492", "https://github.com/ggml-org/llama.cpp/issues/9492", "llama.cpp", None,
                 "all 33 layers on the GPU; only the first request was slow (a warm-up effect)",
                 (fill("llamacpp.log-offloaded", "llm_load_tensors", 33, 33),
                  fill("llamacpp.log-n-ctx", "llama_new_context_with_model", 1024)),
                 None),
    ]
