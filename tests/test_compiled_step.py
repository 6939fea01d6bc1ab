"""The compiled decode step (reference_engine/engine/compiled_step.py): the same greedy tokens as eager for each
weight path the CPU kernels run, padding to a bucket, and each way `auto` / `on` falls back or fails.

Every engine here is the tiny preset with one or a few buckets: a cold compile of one bucket takes about 8 s on a
2-core host. The cache directory is shared by the module, so a graph compiled once is loaded after that."""
from __future__ import annotations

import logging

import pytest
import torch

from triage.core.errors import EngineError
from triage.reference_engine.engine import compiled_step
from triage.reference_engine.engine.compiled_step import (
    CompiledDecode,
    buckets_for,
    choose_compile,
    inductor_cache_dir,
)
from triage.reference_engine.engine.engine_config import EngineConfig
from triage.reference_engine.engine.llm_engine import LLMEngine
from triage.reference_engine.layers.kernels import bf16_weights, quant_weights
from triage.reference_engine.layers.sampling_params import SamplingParams

pytestmark = pytest.mark.slow

PROMPTS = [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("inductor"))


def _bf16_stored_tiny(max_num_seqs: int) -> LLMEngine:
    """The tiny preset with fp32 arithmetic over bf16-stored weights (the bf16 kernel's path): its weights are
    rounded to bf16 values first, as a bf16 checkpoint's are."""
    engine = LLMEngine(EngineConfig(model="tiny", dtype="float32", weight_storage="fp32", max_num_seqs=max_num_seqs))
    model = engine.runner.model
    with torch.no_grad():
        for m in model.modules():
            if type(m) is torch.nn.Linear:
                m.weight.copy_(m.weight.bfloat16().float())
    assert bf16_weights.store_bf16(model) > 0
    return engine


def _tokens(engine: LLMEngine) -> list[list[int]]:
    return [c.output_token_ids for c in engine.generate(PROMPTS, GREEDY)]


def _compiled_against_eager(engine: LLMEngine, cache_dir: str) -> None:
    eager = _tokens(engine)
    choice = choose_compile(engine.runner, "on", engine.config.max_num_seqs, cache_dir)
    assert choice.compiled and choice.step == "compiled" and choice.compile_s > 0
    assert choice.buckets == buckets_for(engine.config.max_num_seqs) and choice.cache_dir == cache_dir
    steps = []
    real_run = engine.runner.compiled.run
    engine.runner.compiled.run = lambda ids, pos, step: steps.append(ids.shape[0]) or real_run(ids, pos, step)
    assert _tokens(engine) == eager
    assert steps, "no decode step ran compiled"


@pytest.mark.skipif(bf16_weights.kernel()[0] is None, reason=f"bf16 kernel unavailable: {bf16_weights.kernel()[1]}")
def test_bf16_stored_weights_give_eager_tokens_and_logits_padded_to_a_bucket(cache_dir):
    engine = _bf16_stored_tiny(max_num_seqs=4)
    eager_tokens, eager_logits = _tokens(engine), _decode_logits(engine, 3)
    inductor_cache_dir(cache_dir)
    runner = engine.runner
    runner.compiled = CompiledDecode(runner.model, (4,), runner.device)    # one bucket: 1, 2 or 3 rows run padded
    with torch.inference_mode():
        runner.compiled.warm_up(runner.scratch_step, (4,))
    assert _tokens(engine) == eager_tokens
    assert torch.allclose(_decode_logits(engine, 3), eager_logits, atol=1e-4, rtol=1e-4)


def _decode_logits(engine: LLMEngine, num_seqs: int) -> torch.Tensor:
    """The logits of one decode step of ``num_seqs`` one-token sequences, on the runner's current path."""
    runner = engine.runner
    step = runner.scratch_step(num_seqs)
    ids = torch.arange(1, num_seqs + 1)
    with torch.inference_mode():
        if runner.compiled is not None:
            return runner.compiled.run(ids, torch.zeros_like(ids), step).clone()
        return runner.model.logits(runner.model.hidden_states(ids, torch.zeros_like(ids), step)).clone()


@pytest.mark.skipif(quant_weights.kernel()[0] is None, reason=f"quant kernels unavailable: {quant_weights.kernel()[1]}")
def test_two_engines_compiled_in_one_process_each_run_their_own_model(cache_dir):
    # The compiled step's guards leave the model out (compiled_step._input_guards): each CompiledDecode must
    # still run its own model, built of other modules (fp32 linears, FP8 kernels), and pick the graph of its
    # bucket by the input's size.
    inductor_cache_dir(cache_dir)
    engines = [LLMEngine(EngineConfig(model="tiny", max_num_seqs=2, quantization=q)) for q in ("none", "fp8")]
    eager = [[_decode_logits(e, n) for n in (1, 2)] for e in engines]
    assert not torch.allclose(eager[0][0], eager[1][0])          # two different models
    for e in engines:
        e.runner.compiled = CompiledDecode(e.runner.model, (1, 2), e.runner.device)
        with torch.inference_mode():
            e.runner.compiled.warm_up(e.runner.scratch_step, (1, 2))
    for _ in range(2):                                            # interleaved: A, B, A, B
        for e, want in zip(engines, eager, strict=True):
            for n, logits in zip((1, 2), want, strict=True):
                torch.testing.assert_close(_decode_logits(e, n), logits, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(quant_weights.kernel()[0] is None, reason=f"quant kernels unavailable: {quant_weights.kernel()[1]}")
@pytest.mark.parametrize(("scheme", "isa"), [("fp8", None), ("int4", None), ("fp8", "avx2_intwiden")])
def test_quantized_kernels_stay_whole_and_give_eager_tokens(scheme, isa, cache_dir, monkeypatch):
    monkeypatch.setattr(quant_weights, "MIN_GAIN_X", 0.0)     # whatever the load: the kernel wins the measurement
    if isa:                                                   # a body the ISA choice would not make on every CPU
        monkeypatch.setenv("TRIAGE_QUANT_ISA", isa)
    quant_weights.choose_isa.cache_clear()
    try:
        engine = LLMEngine(EngineConfig(model="tiny", quantization=scheme, max_num_seqs=1))
    finally:
        quant_weights.choose_isa.cache_clear()
    kernels = [m for m in engine.runner.model.modules() if getattr(m, "path", "").startswith("cpu_")]
    assert kernels and all(quant_weights.ISA_NAMES[m.isa] == isa for m in kernels if isa)
    _compiled_against_eager(engine, cache_dir)


def test_auto_keeps_eager_when_the_compiled_step_is_not_faster(cache_dir, monkeypatch, caplog):
    monkeypatch.setattr(compiled_step, "MIN_GAIN_X", 1e9)
    with caplog.at_level(logging.INFO, logger="triage.reference_engine"):
        engine = LLMEngine(EngineConfig(model="tiny", max_num_seqs=1, compile="auto", compile_cache_dir=cache_dir))
    choice = engine.compile_choice
    assert not choice.compiled and engine.runner.compiled is None and engine.stats().decode_step == "eager"
    assert "not faster here" in choice.reason and "x eager at batch size 1" in choice.reason
    assert "Decode step runs eager: the compiled step is not faster here" in caplog.text


def test_a_step_dynamo_cannot_trace_whole_falls_back_under_auto_and_fails_under_on(cache_dir, monkeypatch):
    forward = compiled_step._decode_forward

    def broken(self, input_ids, positions):
        torch._dynamo.graph_break()
        return forward(self, input_ids, positions)

    monkeypatch.setattr(compiled_step, "_decode_forward", broken)
    engine = LLMEngine(EngineConfig(model="tiny", max_num_seqs=1, compile="auto", compile_cache_dir=cache_dir))
    assert not engine.compile_choice.compiled and "could not be compiled" in engine.compile_choice.reason
    assert engine.generate([[1, 2]], GREEDY)[0].output_token_ids       # and it still serves, eager
    with pytest.raises(EngineError, match="compile=on, but the decode step could not be compiled"):
        LLMEngine(EngineConfig(model="tiny", max_num_seqs=1, compile="on", compile_cache_dir=cache_dir))


def test_without_a_cpp_compiler_auto_says_so_and_stays_eager(tmp_path, caplog):
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import clear_inductor_caches

    torch._dynamo.reset()       # nothing compiled earlier in this process may be reused: traces, nor C++ modules
    clear_inductor_caches()
    # Inductor's own patch (monkeypatch would delete the option on the way out, hiding it from later tests).
    with inductor_config.patch({"cpp.cxx": (str(tmp_path / "no-such-c++"),)}), \
            caplog.at_level(logging.WARNING, logger="triage.reference_engine"):
        engine = LLMEngine(EngineConfig(model="tiny", max_num_seqs=1, compile="auto",
                                        compile_cache_dir=str(tmp_path / "fresh-cache")))
    assert not engine.compile_choice.compiled and "could not be compiled" in engine.compile_choice.reason
    assert "Decode step runs eager" in caplog.text


def test_off_compiles_nothing_and_says_eager():
    engine = LLMEngine(EngineConfig(model="tiny"))
    assert engine.compile_choice.reason == "eager (compile=off)" and engine.runner.compiled is None


def test_an_unknown_compile_mode_is_refused():
    with pytest.raises(EngineError, match="compile='sometimes' is not one of off, auto, on"):
        EngineConfig(compile="sometimes").validate()


@pytest.mark.parametrize(("max_num_seqs", "buckets"), [(1, (1,)), (3, (1, 2, 3)), (8, (1, 2, 4, 8)),
                                                       (64, (1, 2, 4, 8, 16, 32))])
def test_buckets_cover_every_batch_a_server_can_hold_up_to_the_kernels_row_limit(max_num_seqs, buckets):
    assert buckets_for(max_num_seqs) == buckets


@pytest.mark.parametrize("knobs", [dict(kv_cache_dtype="fp8"), dict(kv_layout="contiguous"),
                                   dict(scheduler="static"), dict(attention="naive"),
                                   dict(enable_chunked_prefill=False, enable_prefix_caching=False)],
                         ids=["fp8-kv", "contiguous", "static", "naive-attention", "no-chunking-no-prefix-cache"])
def test_every_cache_layout_scheduler_and_backend_gives_eager_tokens(knobs, cache_dir):
    """Attention is one opaque operator, so the compiled graph is the same for all of these (compiled once, then
    loaded from the cache); what differs runs inside the operator, eager, as it does without compiling."""
    config = EngineConfig(model="tiny", dtype="float32", max_num_seqs=1, **knobs)
    eager = [c.output_token_ids for c in LLMEngine(config).generate(PROMPTS, GREEDY)]
    compiled = LLMEngine(config.replace(compile="on", compile_cache_dir=cache_dir))
    assert compiled.compile_choice.compiled
    assert [c.output_token_ids for c in compiled.generate(PROMPTS, GREEDY)] == eager
