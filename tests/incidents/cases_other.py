"""SGLang, TGI, llama.cpp and Ollama incidents, and NCCL ones under vLLM, each from a public thread."""
from __future__ import annotations

from tests.incidents.build import Incident, fill, ollama, sglang, tgi, vllm0, vllm1


def _decode(when: str, tp: int, running: int, tokens: int, usage: float, gen: float, queue: int,
            version: str = "0.5") -> str:
    """SGLang's decode-batch line, assembled from its parts as the scheduler does."""
    if version == "0.4":
        head = fill("sglang.log-decode-batch-0.4", running, fill("sglang.log-decode-batch-tokens-0.4", tokens, usage))
        tail = fill("sglang.log-decode-batch-tail-0.4", True, gen, queue)
    else:
        head = fill("sglang.log-decode-batch", "", running, fill("sglang.log-decode-batch-tokens", tokens, usage))
        tail = fill("sglang.log-decode-batch-tail", "cuda graph", True, gen, queue)
    return sglang(when, tp) + head + tail


def sglang_incidents() -> list[Incident]:
    retract = fill("sglang.log-retract-0.4", 1, 0.0980, 0.1919)
    return [
        Incident("sglang-retract-4184", "https://github.com/sgl-project/sglang/issues/4184", "sglang", None,
                 "the KV token pool filled during decode, so the scheduler retracted requests",
                 (sglang("2025-03-07 21:49:30", 9) + fill("sglang.log-max-total-num-tokens-0.4", 480000, 16384,
                                                           16384, 1024, 163840, 12.50),
                  sglang("2025-03-07 21:49:33", 13) + retract, sglang("2025-03-07 21:49:45", 9) + retract),
                 "KV002", ("--mem-fraction-static",),
                 note="The thread's SGLang worded it 'Decode out of memory happened. #retracted_reqs: 1'; the figures "
                      "are written in 0.4.10's retract line. The start-up line's figures are not from the thread."),
        Incident("sglang-retract-2746", "https://github.com/sgl-project/sglang/issues/2746", "sglang", None,
                 "two very long generations filled the KV pool (token usage 1.00), forcing retraction",
                 (_decode("2025-01-06 02:58:41", 0, 2, 307801, 1.00, 10.92, 0, "0.4"),
                  sglang("2025-01-06 02:58:44", 0) + fill("sglang.log-retract-0.4", 1, 0.0980, 0.9446)),
                 "KV002", ()),
        Incident("sglang-retract-marin1838", "https://github.com/marin-community/marin/issues/1838", "sglang", None,
                 "a larger page size made the KV pool fill: retraction, then a fatal decode OOM",
                 (sglang("2025-11-07 15:45:28") + fill("sglang.log-retract-0.4", 1, 0.0980, 0.7070),
                  sglang("2025-11-07 15:45:28") + fill("sglang.log-decode-oom-0.4", 363, "Available tokens: 8064")),
                 "KV002", (), note="sglang-jax on TPU logs SGLang's own lines."),
        Incident("sglang-kv-saturated-14972", "https://github.com/sgl-project/sglang/issues/14972", "sglang", None,
                 "decode at 94% token usage with 5 requests queued, then retraction under overlap scheduling",
                 (_decode("2025-12-12 08:43:49", 0, 6, 1900, 0.93, 450.10, 5),
                  _decode("2025-12-12 08:43:59", 0, 6, 1920, 0.94, 446.45, 5)),
                 "KV001", ("--mem-fraction-static",)),
        Incident("sglang-not-enough-memory-322", "https://github.com/sgl-project/sglang/issues/322", "sglang", "0.1.13",
                 "the KV pool came out empty at start-up: a larger --mem-fraction-static leaves room for it",
                 (sglang("2024-03-22 10:00:00") + fill("sglang.log-not-enough-memory-0.4"),),
                 "ENG010", (), text_contains=("--mem-fraction-static",), severity="critical"),
        Incident("sglang-graph-oom-5285", "https://github.com/sgl-project/sglang/issues/5285", "sglang", None,
                 "CUDA-graph capture ran out of memory at start-up (DeepEP low latency, 2x8 H20)",
                 (sglang("2025-04-11 03:00:00", 7) + fill("sglang.log-graph-0.4", 12.31),
                  "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 "
                  "has a total capacity of 95.00"),
                 "ENG010", ("--disable-cuda-graph",), severity="critical", text_contains=("cuda_graph",),
                 note="The thread's error line is cut after the total capacity, as a web page left it."),
    ]


def tgi_incidents() -> list[Incident]:
    def prefill(n: int, form: str = "tgi.log-prefill-oom") -> tuple[str, ...]:
        return ("RuntimeError: " + fill(form, n),
                tgi("2023-09-26T21:48:00.969072Z", "ERROR") + fill("tgi.log-method-error", "Warmup"))

    head = (tgi("2023-09-26T21:46:00.000000Z") + "Args {", '    model_id: "TheBloke/Llama-2-70B-chat-GPTQ",',
            "    max_batch_prefill_tokens: 4096,", "    max_total_tokens: 4096,", "}",
            tgi("2023-09-26T21:47:50.000000Z") + fill("tgi.log-warmup"))
    return [
        Incident("tgi-prefill-oom-1067", "https://github.com/huggingface/text-generation-inference/issues/1067", "tgi",
                 None, "the warm-up prefill of --max-batch-prefill-tokens 4096 ran out of memory", (*head, *prefill(4096)),
                 "ENG010", ("--max-batch-prefill-tokens 2048",), severity="critical", text_contains=("warmup",),
                 note="The launcher's Args print is shortened to the fields the thread states."),
        Incident("tgi-prefill-oom-755", "https://github.com/huggingface/text-generation-inference/issues/755", "tgi",
                 None, "the warm-up prefill ran out of memory: decrease --max-batch-prefill-tokens",
                 prefill(4096, "tgi.log-prefill-oom-2.0"), "ENG010", ("--max-batch-prefill-tokens 2048",),
                 severity="critical"),
        Incident("tgi-prefill-oom-1164", "https://github.com/huggingface/text-generation-inference/issues/1164", "tgi",
                 None, "even a 256-token warm-up prefill did not fit (the model barely fits)", prefill(256),
                 "ENG010", ("--max-batch-prefill-tokens 128",), severity="critical"),
    ]


def offload_incidents() -> list[Incident]:
    def lcpp(on: int, total: int) -> tuple[str, ...]:
        return (fill("llamacpp.log-offloading-repeating", "llm_load_tensors", on),
                fill("llamacpp.log-offloaded", "llm_load_tensors", on, total))

    memory = ('library=cuda layers.requested=-1 layers.model=81 layers.offload=44 layers.split=11,11,11,11 '
              'memory.available="[22.0 GiB 22.0 GiB 22.0 GiB 22.0 GiB]" memory.gpu_overhead="0 B" '
              'memory.required.full="127.4 GiB" memory.required.partial="87.1 GiB" memory.required.kv="19.5 GiB"')
    short = ('library=cuda layers.requested=49 layers.model=49 layers.offload=48 layers.split="" '
             'memory.available="[10.9 GiB]" memory.gpu_overhead="0 B" memory.required.full="11.0 GiB" '
             'memory.required.partial="8.5 GiB" memory.required.kv="608.0 MiB"')
    return [
        Incident("llamacpp-partial-offload-llm19", "https://github.com/simonw/llm-llama-cpp/issues/19", "llama.cpp",
                 None, "the plugin hard-coded n_gpu_layers=1, so 1 of 35 layers ran on the GPU",
                 (*lcpp(1, 35), "llm_load_tensors: VRAM used: 124 MB"), "ENG012", ("-ngl",)),
        Incident("ollama-partial-offload-9181", "https://github.com/ollama/ollama/issues/9181", "ollama", "0.5.11",
                 "22 GiB per card held 11 layers each: the 64000-token context's 19.5 GiB of KV left 44 of 81 layers "
                 "on the GPU",
                 (ollama("2025-02-18T02:21:20.000Z", "routes.go:1277") + 'msg="' + fill("ollama.log-listening-0.5",
                                                                                       "127.0.0.1:11434", "0.5.11") + '"',
                  ollama("2025-02-18T02:21:25.646Z", "server.go:130") + "msg=" + fill("ollama.log-offload-0.5") + " "
                  + memory),
                 "ENG012", ("smaller context",), text_contains=("44 of 81",)),
        Incident("ollama-partial-offload-3301", "https://github.com/ollama/ollama/issues/3301", "llama.cpp", None,
                 "with 51 of 81 layers on the CPU, the CPU part bounds the token speed",
                 (*lcpp(30, 81), "llm_load_tensors:        CPU buffer size = 38110.61 MiB",
                  "llm_load_tensors:      CUDA0 buffer size = 13771.88 MiB"), "ENG012", (),
                 note="An Ollama thread whose excerpt holds only its runner's lines, which are llama.cpp's: triage "
                      "names llama.cpp."),
        Incident("ollama-partial-offload-8393", "https://github.com/ollama/ollama/issues/8393", "llama.cpp", None,
                 "with 2 of 33 layers on the CPU the GPU waits for the CPU: near-zero GPU use, CPU at 100%",
                 (fill("llamacpp.log-cuda-devices", "ggml_cuda_init", 1, 8192), *lcpp(31, 33)), "ENG012", (),
                 note="An Ollama thread whose excerpt holds only its runner's (llama.cpp's) lines."),
        Incident("ollama-partial-offload-11819", "https://github.com/ollama/ollama/issues/11819", "ollama", "0.11.4",
                 "the estimate put all layers 0.1 GiB above the memory available: 48 of 49 offloaded",
                 (ollama("2025-08-12T10:00:00.000Z", "server.go:175") + "msg=" + fill("ollama.log-offload-0.5") + " "
                  + short,),
                 "ENG012", (), text_contains=("48 of 49",)),
    ]


def nccl_incidents() -> list[Incident]:
    timeout = "WorkNCCL(SeqNum={}, OpType=ALLREDUCE, NumelIn={}, NumelOut={}, Timeout(ms)={})"
    info = ("flow-matic:820398:820398 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
            "file: No such file or directory No plugin found (libnccl-net.so), using internal implementation")
    return [
        Incident("vllm-nccl-timeout-5458", "https://github.com/vllm-project/vllm/issues/5458", "vllm", None,
                 "the first all-reduce between the tensor-parallel ranks never completed",
                 (vllm0("06-12 10:00:00", "api_server.py:585") + "vLLM API server version 0.5.0",
                  "[rank0]:[E ProcessGroupNCCL.cpp:563] " + fill("runtime.torch-nccl-watchdog-timeout", 0,
                                                                  timeout.format(1, 1, 1, 600000), 600086)),
                 "ENG007", ("NCCL_DEBUG=INFO",), text_contains=("timeout",)),
        Incident("vllm-nccl-timeout-2734", "https://github.com/vllm-project/vllm/issues/2734", "vllm", None,
                 "a collective hung mid-run on tp=8 (throughput 0) until the 30-minute watchdog timeout",
                 (vllm0("02-03 13:18:39", "llm_engine.py:706") + fill("vllm.log-stats-0.6", 0.0, 0.0, 1, 0, 0, 0.0, 0.0),
                  "[E ProcessGroupNCCL.cpp:475] " + fill("runtime.torch-nccl-watchdog-timeout", 4,
                                                         timeout.format(20518, 106496, 106496, 1800000), 1800270)),
                 "ENG007", (), text_contains=("timeout",), quiet=("KV001", "KV002")),
        Incident("vllm-nccl-shm-minimax42", "https://github.com/MiniMax-AI/MiniMax-01/issues/42", "vllm", "0.8.3",
                 "NCCL could not create its /dev/shm segment: too little shared memory in the container",
                 ("(VllmWorkerProcess pid=221) ERROR 04-06 20:46:48 [multiproc_worker_utils.py:238] "
                  "torch.distributed.DistBackendError: " + fill("runtime.torch-nccl-error",
                  "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp", 268,
                  "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"),
                  fill("runtime.nccl-warn", "h200-0", 221, 221, 0, "misc/shmutils.cc", 72,
                       "Error while creating shared memory segment /dev/shm/nccl-xxxxx (size 7340384)")),
                 "ENG007", ("NCCL_DEBUG=INFO",), text_contains=("system",), named=False),
        Incident("vllm-nccl-ibv-19613", "https://github.com/vllm-project/vllm/issues/19613", "vllm", "0.9.1",
                 "NCCL_BUFFSIZE was set too large, so registering the buffer failed",
                 (fill("runtime.nccl-warn", "kilo", 318, 3584, 5, "misc/ibvwrap.cc", 183,
                       "Call to ibv_reg_dmabuf_mr failed with error Cannot allocate memory"),),
                 "ENG007", (), named=False),
        Incident("vllm-nccl-info-dlerror-6370", "https://github.com/vllm-project/vllm/issues/6370", "vllm", "0.5.1",
                 "the NET/Plugin dlerror line is INFO: NCCL falls back to its internal implementation",
                 (vllm0("07-12 09:00:00", "api_server.py:585") + "vLLM API server version 0.5.1", info,
                  "flow-matic:820398:820779 [0] NCCL INFO NET/IB : No device found."),
                 None, quiet=("ENG007",)),
        Incident("vllm-shm-broadcast-at-start-348", "https://github.com/eugr/spark-vllm-docker/issues/348", "vllm",
                 "0.20.2", "the shared-memory broadcast message during start-up only means a worker was busy "
                 "(compilation, weight quantization)",
                 (vllm1("08-15 11:15:00", "api_server.py:1898") + "vLLM server version 0.20.2, serving model "
                  "deepseek-ai/DeepSeek-V4-Flash",
                  "(EngineCore pid=222) INFO 08-15 11:16:19 [shm_broadcast.py:705] No available shared memory "
                  "broadcast block found in 60 seconds. This typically happens when some processes are hanging or "
                  "doing some time-consuming work (e.g. compilation, weight/kv cache quantization)."),
                 None, quiet=("ENG007",)),
    ]
