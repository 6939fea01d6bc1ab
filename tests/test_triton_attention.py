"""Triton attention kernels vs a plain torch reference.

On a GPU host these run on CUDA (marked gpu). Where triton is installed but there is no GPU, the
same checks run on CPU tensors under Triton's interpreter, at small sizes. The interpreter must be
switched on (TRITON_INTERPRET=1) before triton is first imported, and torch._dynamo imports triton
whenever it is installed, so those checks run in a fresh child process (the ``cpu_errors`` fixture).
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HAS_TRITON = importlib.util.find_spec("triton") is not None
REPO = Path(__file__).resolve().parent.parent
CPU_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="the gpu-marked variants cover this")

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed here")


def _ref_attention(q, k, v, q_offset: int):
    """q [Sq, H, D], k/v [Sk, H_kv, D]; query i sees keys ≤ q_offset + i (lower-right causal)."""
    sq, h, d = q.shape
    sk, hkv, _ = k.shape
    k = k.repeat_interleave(h // hkv, dim=1)
    v = v.repeat_interleave(h // hkv, dim=1)
    s = torch.einsum("qhd,khd->hqk", q.float(), k.float()) / math.sqrt(d)
    mask = torch.arange(sk)[None, :] <= (q_offset + torch.arange(sq))[:, None]
    s = s.masked_fill(~mask.to(s.device), float("-inf"))
    return torch.einsum("hqk,khd->qhd", s.softmax(-1), v.float())


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _prefill_error(bsz, h, hkv, s, d, dtype) -> float:
    from triage.reference_engine.layers.attention.triton_prefill import flash_attention_prefill

    dev = _device()
    q = torch.randn(bsz, h, s, d, device=dev, dtype=dtype)
    k = torch.randn(bsz, hkv, s, d, device=dev, dtype=dtype)
    v = torch.randn(bsz, hkv, s, d, device=dev, dtype=dtype)
    out = flash_attention_prefill(q, k, v, causal=True, block_m=16 if dev == "cpu" else 64,
                                  block_n=16 if dev == "cpu" else 64)
    err = 0.0
    for b in range(bsz):
        ref = _ref_attention(q[b].transpose(0, 1), k[b].transpose(0, 1), v[b].transpose(0, 1), 0)
        err = max(err, (out[b].transpose(0, 1).float() - ref).abs().max().item())
    return err


def _paged_case(dtype, fp8: bool):
    """Three sequences: a decode (q_len 1), a chunk after context, a fresh prefill; shuffled pages."""
    from triage.reference_engine.layers.quant.kv_fp8 import quantize_kv

    dev = _device()
    torch.manual_seed(0)
    h, hkv, d, page = 4, 2, 32, 16
    q_lens, kv_lens = [1, 7, 20], [37, 29, 20]
    num_blocks = 16
    k_cache = torch.zeros(num_blocks, page, hkv, d, device=dev)
    v_cache = torch.zeros(num_blocks, page, hkv, d, device=dev)
    perm = torch.randperm(num_blocks).tolist()
    max_blocks = max(math.ceil(n / page) for n in kv_lens)
    block_table = torch.zeros(len(kv_lens), max_blocks, dtype=torch.int32, device=dev)
    ks, vs, qs = [], [], []
    for i, (ql, kl) in enumerate(zip(q_lens, kv_lens, strict=True)):
        kk, vv = torch.randn(kl, hkv, d, device=dev), torch.randn(kl, hkv, d, device=dev)
        ks.append(kk)
        vs.append(vv)
        qs.append(torch.randn(ql, h, d, device=dev))
        for j in range(math.ceil(kl / page)):
            blk = perm.pop()
            block_table[i, j] = blk
            n = min(page, kl - j * page)
            k_cache[blk, :n], v_cache[blk, :n] = kk[j * page: j * page + n], vv[j * page: j * page + n]
    k_scale = v_scale = None
    if fp8:
        k_cache, k_scale = quantize_kv(k_cache)
        v_cache, v_scale = quantize_kv(v_cache)
    else:
        k_cache, v_cache = k_cache.to(dtype), v_cache.to(dtype)
    q = torch.cat(qs).to(dtype)
    cu = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device=dev)
    seq_lens = torch.tensor(kv_lens, dtype=torch.int32, device=dev)
    return q, k_cache, v_cache, block_table, cu, seq_lens, max(q_lens), k_scale, v_scale, qs, ks, vs, q_lens, kv_lens


def _paged_error(dtype, fp8) -> float:
    from triage.reference_engine.layers.attention.triton_paged import paged_attention

    (q, kc, vc, bt, cu, sl, mq, k_scale, v_scale, qs, ks, vs, q_lens, kv_lens) = _paged_case(dtype, fp8)
    out = paged_attention(q, kc, vc, bt, cu, sl, mq, k_scale=k_scale, v_scale=v_scale)
    err = 0.0
    for i in range(len(q_lens)):
        ref = _ref_attention(qs[i].to(dtype), ks[i], vs[i], kv_lens[i] - q_lens[i])
        got = out[int(cu[i]): int(cu[i + 1])].float()
        if got.shape != ref.shape:
            raise AssertionError(f"sequence {i}: shape {tuple(got.shape)} != {tuple(ref.shape)}")
        err = max(err, (got - ref).abs().max().item())
    return err


def _adapter_error() -> float:
    """The engine backend adapter vs the engine's own SDPA backend on the same paged cache."""
    from triage.reference_engine.layers.attention.base import AttentionMetadata
    from triage.reference_engine.layers.attention.sdpa import SdpaAttention
    from triage.reference_engine.layers.attention.triton_backend import TritonPagedAttention

    (q, kc, vc, bt, cu, _sl, _mq, _ks, _vs, _qs, _k, _v, q_lens, kv_lens) = _paged_case(torch.float32, fp8=False)
    tables = [[int(b) for b in bt[i, : math.ceil(kv_lens[i] / 16)]] for i in range(len(kv_lens))]
    meta = AttentionMetadata(q_starts=[int(x) for x in cu[:-1]], q_lens=q_lens, kv_lens=kv_lens,
                             block_tables=tables, block_size=16)
    scale = 1 / math.sqrt(q.shape[-1])
    got = TritonPagedAttention()(q, kc, vc, meta, scale)
    return (got - SdpaAttention()(q, kc, vc, meta, scale)).abs().max().item()


def _cpu_checks() -> dict[str, float]:
    """Entry point of the child process (TRITON_INTERPRET=1): each kernel's max abs error."""
    return {"prefill": _prefill_error(bsz=2, h=4, hkv=2, s=40, d=16, dtype=torch.float32),
            "paged": _paged_error(torch.float32, fp8=False),
            "paged_fp8": _paged_error(torch.float32, fp8=True),
            "adapter": _adapter_error()}


@pytest.fixture(scope="module")
def cpu_errors() -> dict[str, float]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    code = "import json, tests.test_triton_attention as t; print(json.dumps(t._cpu_checks()))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@CPU_ONLY
@pytest.mark.slow
def test_prefill_kernel_interpreted_on_cpu(cpu_errors):
    assert cpu_errors["prefill"] < 1e-4


@CPU_ONLY
@pytest.mark.slow
def test_paged_kernel_interpreted_on_cpu(cpu_errors):
    assert cpu_errors["paged"] < 1e-4
    assert 0 < cpu_errors["paged_fp8"] < 0.15   # e4m3 storage: close, not exact


@CPU_ONLY
@pytest.mark.slow
def test_engine_backend_adapter_matches_engine_sdpa_backend(cpu_errors):
    assert cpu_errors["adapter"] < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_prefill_kernel_gpu(dtype):
    assert _prefill_error(bsz=2, h=8, hkv=2, s=300, d=64, dtype=dtype) < 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", [False, True])
def test_paged_kernel_gpu(fp8):
    assert _paged_error(torch.bfloat16, fp8) < (3e-2 if not fp8 else 0.15)


@pytest.mark.gpu
def test_engine_backend_adapter_matches_engine_sdpa_backend_gpu():
    assert _adapter_error() < 3e-2


@pytest.mark.gpu
def test_prefill_kernel_matches_sdpa_at_2k():
    from triage.reference_engine.layers.attention.triton_prefill import flash_attention_prefill

    q, k, v = (torch.randn(1, 8, 2048, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (flash_attention_prefill(q, k, v) - ref).abs().max().item() < 2e-2


def test_register_reports_why_not_on_a_cpu_host(monkeypatch):
    from triage.reference_engine.layers.attention.triton_backend import register_triton_backend

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if torch.cuda.is_available():
        pytest.skip("a GPU host registers the backend")
    reason = register_triton_backend("cuda")
    assert reason is not None and "CUDA" in reason


@pytest.mark.gpu
def test_engine_generates_the_same_tokens_with_the_triton_backend():
    from triage.reference_engine import EngineConfig, SamplingParams
    from triage.reference_engine.engine.llm_engine import LLMEngine
    from triage.reference_engine.layers.attention.triton_backend import register_triton_backend

    assert register_triton_backend("cuda") is None
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    prompts = [list(range(1, 40)), list(range(5, 70))]
    outs = {}
    for backend in ("sdpa", "triton"):
        eng = LLMEngine(EngineConfig(model="tiny", device="cuda", dtype="float32", attention=backend,
                                     num_kv_blocks=64, max_model_len=256))
        outs[backend] = [c.output_token_ids for c in eng.generate(prompts, params)]
    assert outs["triton"] == outs["sdpa"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_prefill_timing_says_why_it_cannot_run_here():
    from triage.reference_engine.layers.attention.triton_bench import time_prefill_vs_sdpa

    out = time_prefill_vs_sdpa(seq_len=64, device="cpu")
    assert set(out) == {"skipped"} and "CUDA" in out["skipped"]


@pytest.mark.gpu
def test_prefill_timing_on_gpu_reports_both_kernels():
    from triage.reference_engine.layers.attention.triton_bench import time_prefill_vs_sdpa

    out = time_prefill_vs_sdpa(seq_len=2048, num_heads=8, num_kv_heads=2, head_dim=64, repeats=3)
    assert out["sdpa_ms"] > 0 and out["triton_ms"] > 0
    assert out["speed_ratio"] == pytest.approx(out["sdpa_ms"] / out["triton_ms"])
