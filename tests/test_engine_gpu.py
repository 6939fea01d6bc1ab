"""The engine on a CUDA device gives the CPU engine's greedy tokens (skipped where there is no GPU)."""
from __future__ import annotations

import pytest

from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams

pytestmark = pytest.mark.gpu

PROMPTS = [[256, 1, 2, 3, 4, 5, 6, 7, 8, 9], [256, 50, 60], [256] + list(range(100, 140))]
GREEDY = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)


@pytest.mark.parametrize("attention", ["naive", "tiled", "sdpa"])
def test_cuda_greedy_matches_cpu(attention):
    cpu = LLMEngine(EngineConfig(model="tiny", dtype="float32", block_size=4))
    gpu = LLMEngine(EngineConfig(model="tiny", dtype="float32", block_size=4, device="cuda",
                                 attention=attention, num_kv_blocks=256, max_num_batched_tokens=16))
    expected = [c.output_token_ids for c in cpu.generate(PROMPTS, GREEDY)]
    assert [c.output_token_ids for c in gpu.generate(PROMPTS, GREEDY)] == expected


def test_cuda_kv_budget_follows_gpu_memory_utilization():
    import torch

    engine = LLMEngine(EngineConfig(model="tiny", device="cuda", gpu_memory_utilization=0.05))
    stats = engine.stats()
    free_b, total_b = torch.cuda.mem_get_info()
    assert 0 < stats.kv_cache_bytes <= 0.05 * total_b
    assert engine.runner.kv_cache.device.type == "cuda"


def test_cuda_compiled_step_with_cuda_graphs_gives_eager_tokens(tmp_path):
    """compile=on on a GPU: torch.compile with CUDA graphs (mode reduce-overhead, attention outside the graphs),
    buckets 1, 2, 4: three sequences run padded to 4."""
    eager = LLMEngine(EngineConfig(model="tiny", dtype="float32", device="cuda", num_kv_blocks=256, max_num_seqs=4))
    compiled = LLMEngine(EngineConfig(model="tiny", dtype="float32", device="cuda", num_kv_blocks=256, max_num_seqs=4,
                                      compile="on", compile_cache_dir=str(tmp_path)))
    assert compiled.compile_choice.compiled and compiled.stats().decode_step == "compiled"
    expected = [c.output_token_ids for c in eager.generate(PROMPTS, GREEDY)]
    assert [c.output_token_ids for c in compiled.generate(PROMPTS, GREEDY)] == expected
