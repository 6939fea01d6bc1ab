"""Every number `triage plan` assumes rather than computes, in one table, each with where it comes from.

They are estimates: the plan report repeats the ones it used, so a reader can see what a result
rests on. Where a flag can override one, the flag is named.
"""
from __future__ import annotations

import triage.engines.truth as engine_truth
from triage.engines import assumed

GIB = 2**30

# The plan is written for the engine triage assumes (vLLM: triage.engines.registry), at its newest tabled release.
# Its default --gpu-memory-utilization comes from that release's table (vllm/config/cache.py: 0.9 up to 0.19,
# 0.92 from 0.20, as the vLLM module's note derives it from the tables).
PLAN_ENGINE = assumed()
PLAN_VLLM_VERSION = engine_truth.newest(PLAN_ENGINE.name)
DEFAULT_GPU_MEMORY_UTILIZATION = float(engine_truth.default(PLAN_ENGINE.name, "gpu_memory_utilization")[0] or 0.9)
# Tokens one scheduler step may carry (--max-num-batched-tokens); vLLM sizes its activation
# profile with it. The plan puts the same value in the suggested command so both agree.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# Per-GPU memory outside weights, activations and KV: CUDA context, cuBLAS workspaces, CUDA graphs,
# NCCL buffers. vLLM start-up logs on H100s show 0.5-1.5 GiB; 1 GiB is the middle.
RUNTIME_OVERHEAD_BYTES = 1 * GIB
# Bytes per activation element during the profile run (bf16/fp16 activations).
ACTIVATION_BYTES = 2
# Sampler logits are fp32.
LOGITS_BYTES = 4
# Default request shape when no --input-len/--output-len is given (tokens).
DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 256
# "Fits with headroom": the KV cache holds at least this many sequences of the planned length
# (or --concurrency sequences when it is given).
DEFAULT_MIN_CONCURRENT_SEQS = 16
# Fraction of spec bandwidth decode reaches in practice (--mbu), and of spec FLOP/s prefill
# reaches (--mfu). "Why Your LLM Inference Is Slow: vLLM, KV Cache, and GPU Fit": inference MFU sits at 10-30% overall because decode is memory-bound;
# a long prefill alone runs far higher. These turn the roofline bound into an expected figure.
DEFAULT_MBU = 0.7
DEFAULT_MFU = 0.5
# Spare capacity on top of the Little's-law replica count ('How to Diagnose and Fix Slow LLM Inference: A Full-Stack Performance Guide' sizes with 25% headroom).
DEFAULT_FLEET_HEADROOM_FRAC = 0.25
# Tensor-parallel sizes tried, smallest first; 8 GPUs is one NVLink domain (an explainer of inference as a memory-bound problem, 'when one GPU isn't enough').
TP_CANDIDATES = (1, 2, 4, 8)
HOURS_PER_MONTH = 730.0
