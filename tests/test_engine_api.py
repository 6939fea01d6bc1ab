"""The public engine API: add_request / step / abort / generate, stop handling, stats, errors."""
from __future__ import annotations

import pytest

from tests.engine_helpers import one_torch_thread  # noqa: F401  (autouse fixture)
from triage.core.errors import EngineError, TriageError
from triage.reference_engine import EngineConfig, LLMEngine, SamplingParams
from triage.reference_engine.models.detokenizer import IncrementalDetokenizer
from triage.reference_engine.models.tokenizer import ByteTokenizer


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(EngineConfig(model="tiny", max_model_len=256))


def _drain(engine) -> dict[str, list]:
    outs: dict[str, list] = {}
    while engine.has_unfinished():
        for out in engine.step():
            outs.setdefault(out.request_id, []).append(out)
    return outs


def test_streamed_deltas_add_up_to_the_completion_text(engine):
    params = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
    expected = engine.generate(["stream me"], params)[0]
    engine.add_request("s", "stream me", params)
    outs = _drain(engine)["s"]
    assert "".join(o.text_delta for o in outs) == expected.text
    assert [t for o in outs for t in o.new_token_ids] == expected.output_token_ids
    assert [o.finished for o in outs] == [False] * 19 + [True]
    last = outs[-1]
    assert last.finish_reason == "length" and last.num_output_tokens == 20
    assert last.num_prompt_tokens == len(ByteTokenizer().encode("stream me"))
    t = last.times
    assert t.arrival_s <= t.scheduled_s <= t.first_token_s <= t.finished_s


def test_stop_string_never_leaks_into_deltas(engine):
    free = engine.generate(["stop test"], SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))[0]
    text = free.text
    stop = text[10:13]                                  # a string the model will produce
    assert len(stop) == 3 and text.find(stop) >= 3
    cut = text.find(stop)
    engine.add_request("st", "stop test", SamplingParams(max_tokens=24, temperature=0.0, stop=(stop,),
                                                         ignore_eos=True))
    outs = _drain(engine)["st"]
    assert "".join(o.text_delta for o in outs) == text[:cut]
    assert outs[-1].finish_reason == "stop"
    streamed = ""
    for o in outs:                                      # at no point did a client see past the stop
        streamed += o.text_delta
        assert stop not in streamed


def test_eos_stops_unless_ignored_or_below_min_tokens():
    engine = LLMEngine(EngineConfig(model="tiny"))
    eos = engine.model_config.eos_token_id
    free = engine.generate([[256, 1, 2, 3]], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))[0]
    # Make the model's third greedy token the EOS id by declaring it so.
    engine.eos_token_ids = (free.output_token_ids[2],)
    stopped = engine.generate([[256, 1, 2, 3]], SamplingParams(max_tokens=8, temperature=0.0))[0]
    assert stopped.finish_reason == "stop"
    assert stopped.output_token_ids == free.output_token_ids[:3]
    ignored = engine.generate([[256, 1, 2, 3]], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))[0]
    assert ignored.finish_reason == "length" and len(ignored.output_token_ids) == 8
    held = engine.generate([[256, 1, 2, 3]], SamplingParams(max_tokens=8, temperature=0.0, min_tokens=5))[0]
    assert len(held.output_token_ids) >= 5
    assert free.output_token_ids[2] not in held.output_token_ids[:5]     # EOS was masked out
    assert eos == 257


def test_seeded_sampling_is_reproducible_and_temperature_varies(engine):
    p = SamplingParams(max_tokens=16, temperature=1.0, seed=1234, ignore_eos=True)
    a = engine.generate(["x"], p)[0].output_token_ids
    b = engine.generate(["x"], p)[0].output_token_ids
    c = engine.generate(["x"], SamplingParams(max_tokens=16, temperature=1.0, seed=99, ignore_eos=True))[0]
    greedy = engine.generate(["x"], SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True))[0]
    assert a == b
    assert a != c.output_token_ids
    assert a != greedy.output_token_ids


def test_top_p_tiny_keeps_only_the_argmax(engine):
    greedy = engine.generate(["q"], SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))[0]
    nucleus = engine.generate(["q"], SamplingParams(max_tokens=10, temperature=1.0, top_p=1e-6, seed=3,
                                                    ignore_eos=True))[0]
    assert nucleus.output_token_ids == greedy.output_token_ids


def test_abort_frees_blocks_immediately():
    engine = LLMEngine(EngineConfig(model="tiny", block_size=4))
    engine.add_request("a", list(range(1, 40)), SamplingParams(max_tokens=50, ignore_eos=True))
    engine.add_request("b", list(range(1, 10)), SamplingParams(max_tokens=5, ignore_eos=True))
    engine.step()
    used = engine.stats().num_kv_blocks_total - engine.stats().num_kv_blocks_free
    assert used == 10 + 3
    assert engine.abort("a") is True
    stats = engine.stats()
    assert stats.num_kv_blocks_total - stats.num_kv_blocks_free == 3
    assert stats.num_requests_running == 1
    assert engine.abort("a") is False
    outs = _drain(engine)
    assert set(outs) == {"b"}
    assert engine.stats().num_kv_blocks_free == engine.stats().num_kv_blocks_total


def test_stats_count_tokens_like_vllm():
    engine = LLMEngine(EngineConfig(model="tiny", block_size=4))
    prompts = [[256] + list(range(1, 20)), [256] + list(range(1, 20)) + [7]]
    engine.generate(prompts[:1], SamplingParams(max_tokens=3, ignore_eos=True))
    engine.generate(prompts[1:], SamplingParams(max_tokens=4, ignore_eos=True))
    s = engine.stats()
    assert s.prompt_tokens_total == 20 + 21
    assert s.generation_tokens_total == 7
    assert s.prefix_cache_queries_total == 41
    assert s.prefix_cache_hits_total == 20            # five full blocks of the first prompt
    assert s.kv_cache_tokens_capacity == s.num_kv_blocks_total * 4
    assert s.kv_cache_bytes == s.num_kv_blocks_total * 4 * engine.model_config.kv_bytes_per_token(4)
    assert s.dtype == "float32" and s.attention_backend == "sdpa" and s.dtype_note
    assert engine.last_step.num_tokens == engine.last_step.num_decode_tokens == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"scheduler": "fifo"}, "scheduler"),
    ({"max_num_seqs": 0}, "max_num_seqs"),
    ({"model": "/nonexistent/model"}, "neither a preset"),
    ({"max_model_len": 10**6}, "max_position_embeddings"),
    ({"attention": "flash9"}, "attention"),
    ({"kv_layout": "contiguous", "num_kv_blocks": 1, "max_model_len": 1024}, "contiguous slot"),
])
def test_bad_config_is_a_clear_engine_error(kwargs, message):
    with pytest.raises(EngineError, match=message) as info:
        LLMEngine(EngineConfig(**kwargs))
    assert isinstance(info.value, TriageError)


def test_bad_requests_are_rejected(engine):
    with pytest.raises(EngineError, match="max_model_len"):
        engine.add_request("long", [1] * 250, SamplingParams(max_tokens=10))
    engine.add_request("dup", [1, 2], SamplingParams(max_tokens=1))
    with pytest.raises(EngineError, match="already in use"):
        engine.add_request("dup", [1, 2], SamplingParams(max_tokens=1))
    with pytest.raises(EngineError, match="out of range"):
        engine.add_request("oov", [1, 999], SamplingParams(max_tokens=1))
    with pytest.raises(EngineError, match="top_p"):
        engine.add_request("tp", [1], SamplingParams(top_p=0.0))
    with pytest.raises(EngineError, match="empty"):
        engine.add_request("e", [], SamplingParams())
    _drain(engine)


def test_incremental_detokenizer_waits_for_whole_characters():
    tok = ByteTokenizer()
    detok = IncrementalDetokenizer(tok, [256], stop=())
    pieces = []
    for b in "héllo €".encode():
        detok.add_token(b)
        pieces.append(detok.take_delta(finished=False))
    assert "".join(pieces) == "héllo €"
    assert all("\ufffd" not in p for p in pieces)


def test_stop_string_split_across_tokens_is_held_back():
    tok = ByteTokenizer()
    detok = IncrementalDetokenizer(tok, [256], stop=("END",))
    seen = ""
    stopped = False
    for b in b"abcEN":
        stopped = detok.add_token(b)
        seen += detok.take_delta(finished=False)
    assert not stopped and seen == "abc"               # "EN" could start "END": held back
    assert detok.add_token(ord("D"))
    assert seen + detok.take_delta(finished=True) == "abc"


def test_static_batching_pads_finished_rows_without_changing_outputs():
    prompts = [[256, 5, 6, 7], [256, 9], [256, 1, 2, 3, 4, 5]]
    params = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True) for n in (2, 9, 5)]
    cont = LLMEngine(EngineConfig(model="tiny", block_size=4)).generate(prompts, params)
    static = LLMEngine(EngineConfig(model="tiny", scheduler="static", kv_layout="contiguous", max_model_len=64))
    for i, (prompt, p) in enumerate(zip(prompts, params, strict=True)):
        static.add_request(f"s{i}", prompt, p)
    padding, finished = 0, {}
    while static.has_unfinished():
        for out in static.step():
            assert out.request_id not in finished, "a padding row must not emit output"
            if out.finished:
                finished[out.request_id] = out.num_output_tokens
        padding += static.last_step.num_padding_tokens
    assert finished == {"s0": 2, "s1": 9, "s2": 5}
    assert padding == (9 - 2) + (9 - 5)               # rows decoded only as padding until the longest ends
    assert static.stats().generation_tokens_total == 16
    assert static.stats().num_kv_blocks_free == static.stats().num_kv_blocks_total
    again = LLMEngine(EngineConfig(model="tiny", scheduler="static", kv_layout="contiguous", max_model_len=64))
    assert [c.output_token_ids for c in again.generate(prompts, params)] == [c.output_token_ids for c in cont]


def test_generate_is_all_or_nothing_on_a_bad_prompt(engine):
    with pytest.raises(EngineError, match="max_model_len"):
        engine.generate([[1, 2], [1] * 300], SamplingParams(max_tokens=4))
    assert not engine.has_unfinished()
    assert engine.stats().num_requests_waiting == 0


def test_static_running_count_excludes_padding_rows():
    engine = LLMEngine(EngineConfig(model="tiny", scheduler="static", kv_layout="contiguous", max_model_len=64))
    engine.add_request("short", [256, 1], SamplingParams(max_tokens=1, ignore_eos=True))
    engine.add_request("long", [256, 2], SamplingParams(max_tokens=6, ignore_eos=True))
    outs = engine.step()
    assert [o.request_id for o in outs if o.finished] == ["short"]
    assert engine.stats().num_requests_running == 1        # "short" is only a padding row now
    assert engine.abort("short") is False                  # finished: nothing to abort


def test_generation_config_eos_ids_are_added(tmp_path):
    import json

    from triage.reference_engine.engine.llm_engine import generation_config_eos

    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 7, 9]}))
    assert generation_config_eos(tmp_path, (2,)) == (7, 9)
    (tmp_path / "generation_config.json").write_text("{not json")
    assert generation_config_eos(tmp_path, (2,)) == ()
    assert generation_config_eos(None, ()) == ()


def test_model_config_sizes_for_planning():
    from triage.reference_engine import PRESETS

    llama8b = PRESETS["llama-3.1-8b"]
    assert 8.0e9 < llama8b.num_params < 8.1e9                 # 8.03B
    assert llama8b.kv_bytes_per_token(2) == 2 * 32 * 8 * 128 * 2   # 128 KiB per token in bf16
    assert llama8b.weight_bytes(2) == 2 * llama8b.num_params
    small = PRESETS["small"]
    assert 0.9e8 < small.num_params < 1.1e8
    assert small.flops_per_token() == 2 * small.num_params      # tied: the embedding doubles as lm_head
    assert 0.49e9 < PRESETS["qwen2.5-0.5b"].num_params < 0.5e9
    assert 0.59e9 < PRESETS["qwen3-0.6b"].num_params < 0.61e9


def test_unchunkable_prompt_is_rejected_instead_of_waiting_forever():
    engine = LLMEngine(EngineConfig(model="tiny", enable_chunked_prefill=False, max_num_batched_tokens=32))
    with pytest.raises(EngineError, match="chunked prefill"):
        engine.add_request("big", [1] * 30, SamplingParams(max_tokens=8))
    engine.add_request("ok", [1] * 20, SamplingParams(max_tokens=8, ignore_eos=True))
    assert len(engine.generate([[1] * 20], SamplingParams(max_tokens=8, ignore_eos=True))[0].output_token_ids) == 8


def test_half_precision_kv_cache_halves_bytes_and_keeps_the_first_token():
    prompts = [[256] + list(range(i, i + 20)) for i in (3, 40, 90)]
    greedy = SamplingParams(max_tokens=1, temperature=0.0)
    full = LLMEngine(EngineConfig(model="tiny", num_kv_blocks=64))
    half = LLMEngine(EngineConfig(model="tiny", num_kv_blocks=64, kv_cache_dtype="bfloat16"))
    assert half.stats().kv_cache_bytes * 2 == full.stats().kv_cache_bytes
    assert (half.stats().kv_cache_dtype, half.stats().dtype) == ("bfloat16", "float32")
    assert [c.output_token_ids for c in half.generate(prompts, greedy)] == \
        [c.output_token_ids for c in full.generate(prompts, greedy)]


def test_prefix_cache_counters_stay_zero_without_prefix_caching():
    for config in (EngineConfig(model="tiny", enable_prefix_caching=False),
                   EngineConfig(model="tiny", kv_layout="contiguous", max_model_len=64),
                   EngineConfig(model="tiny", scheduler="static")):
        engine = LLMEngine(config)
        engine.generate([[256] + list(range(1, 40))] * 2, SamplingParams(max_tokens=2, ignore_eos=True))
        stats = engine.stats()
        assert (stats.prefix_cache_queries_total, stats.prefix_cache_hits_total) == (0, 0)
        assert stats.prompt_tokens_total == 80
