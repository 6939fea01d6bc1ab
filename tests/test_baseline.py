"""`triage baseline` end to end on the tiny preset, plus the pure pieces (gains, percentiles, traces)."""
from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from triage.baseline.config import ROW_KEYS, BaselineConfig
from triage.baseline.engine_driver import RequestTrace, percentile
from triage.baseline.results import Better, RowStatus, measured, skipped
from triage.baseline.runner import ROWS, run_baseline
from triage.cli import app
from triage.core.report import ReportKind, Target, new_report
from triage.core.report_io import to_dict
from triage.core.roofline import decode_tokens_per_s_bound

TINY = BaselineConfig(
    model="tiny", dtype="float32", num_threads=1, bandwidth_buffer_bytes=16 << 20, matmul_n=64,
    batching_num_requests=4, batching_max_num_seqs=2, batching_prompt_tokens=8, batching_min_tokens=2,
    batching_max_tokens=6,
    kv_max_model_len=256, kv_budget_tokens=512, kv_num_requests=12, kv_prompt_tokens=20, kv_output_tokens=2,
    kv_max_num_seqs=64,
    attention_context_tokens=192, attention_backends=("naive", "sdpa"),
    quant_group_size=32, quant_decode_tokens=3, quant_fp8_decode_tokens=2, quality_num_prompts=2,
    quality_prompt_tokens=16,
    prefix_tokens=64, prefix_suffix_tokens=8, prefix_num_requests=2,
    chunk_num_decoding=2, chunk_decode_tokens=6, chunk_long_prompt_tokens=96, chunk_num_long=1, chunk_budget_tokens=32,
    roofline_batch_sizes=(1, 4), roofline_prompt_tokens=8, roofline_decode_steps=3, roofline_dtypes=("float32",),
    compile_batch_sizes=(1, 2), compile_decode_steps=3,
)


@pytest.fixture(scope="module")
def tiny_section():
    return run_baseline(TINY)


def _rows(section) -> dict:
    return {r["key"]: r for r in section["rows"]}


def test_every_row_key_has_a_runner():
    assert set(ROWS) | {"roofline"} == set(ROW_KEYS)


@pytest.mark.slow
def test_tiny_baseline_report_validates_and_tables_are_rectangular(tiny_section, report_validator):
    from triage.probes.host import host_info

    report = new_report(ReportKind.BASELINE, host_info(), Target(engine="reference", model="tiny"),
                        baseline=tiny_section)
    data = report_validator(report)
    assert data["kind"] == "baseline"
    titles = [t["title"] for t in data["baseline"]["tables"]]
    assert titles[0].startswith("Before / after")
    for t in data["baseline"]["tables"]:
        assert all(len(row) == len(t["columns"]) for row in t["rows"]), t["title"]
    # one table row per ablation row, in order
    assert len(data["baseline"]["tables"][0]["rows"]) == len(data["baseline"]["rows"])


@pytest.mark.slow
def test_rows_that_cannot_apply_here_are_skipped_with_a_reason(tiny_section):
    rows = _rows(tiny_section)
    for key in ("fp4",) + (() if torch.cuda.is_available() else ("offload",)):
        assert rows[key]["status"] == "skipped" and rows[key]["reason"] and rows[key]["gain"] is None
    measured_keys = {k for k, r in rows.items() if r["status"] == "measured"}
    assert {"batching", "kv-layout", "attention", "weights-fp8", "weights-int4", "kv-fp8", "prefix-cache",
            "chunked-prefill", "chunked-prefill-itl", "cold-start"} <= measured_keys
    cold = rows["cold-start"]
    assert cold["before"] > 0 and cold["after"] > 0 and cold["unit"] == "s"


@pytest.mark.slow
def test_paged_kv_holds_more_requests_than_contiguous_slots(tiny_section):
    row = _rows(tiny_section)["kv-layout"]
    # contiguous: one max_model_len slot per request, so the budget holds exactly budget // max_model_len
    assert row["before"] == TINY.kv_budget_tokens // TINY.kv_max_model_len == 2
    # paged: 20 + 2 tokens use 2 blocks of 16, so 32 blocks hold 16 requests; only 12 were sent
    assert row["after"] == TINY.kv_num_requests
    assert row["gain"] == pytest.approx(6.0)


@pytest.mark.slow
def test_quantized_weights_are_smaller_and_their_error_is_reported(tiny_section):
    rows = _rows(tiny_section)
    fp8, int4 = rows["weights-fp8"]["details"], rows["weights-int4"]["details"]
    assert 1.0 < fp8["weight_compression"] < int4["weight_compression"]
    for d in (fp8, int4):
        assert 0 < d["logit_error_mean_abs"] <= d["logit_error_max_abs"]
        assert 0.0 <= d["top1_agreement_frac"] <= 1.0
        assert d["num_quality_positions"] == TINY.quality_num_prompts * TINY.quality_prompt_tokens
    assert sum(int4["execution_paths"].get(p, 0) for p in ("int4pack_cpu", "reference", "cpu_int4_kernel")) >= 1
    for d in (fp8, int4):          # each row names what ran
        assert d["kernel"] and d["isa"] and d["bytes_per_weight"] > 0 and isinstance(d["fell_back"], bool)
        assert d["path_reason"] and d["base_path"]["kernel"]
        assert d["decode_rounds"] == TINY.quant_rounds


def test_a_quantized_model_is_timed_in_alternation_with_the_base_and_the_medians_count(monkeypatch):
    """On a shared host a burst that lands on one side's only run decides a single-run ratio; here the medians
    of alternating runs drop the one slow run of each side, and the base model is put back even when a run fails."""
    from triage.baseline import model_rows

    class Runner:
        model = None

    engine = type("Engine", (), {"runner": Runner()})()
    base, quant = object(), object()
    seen, rates = [], iter([10.0, 30.0, 2.0, 33.0, 11.0, 3.0])     # base, quant, base, quant, base, quant

    def fake_decode(eng, vocab, num_tokens):
        seen.append(eng.runner.model)
        return next(rates)

    monkeypatch.setattr(model_rows, "_decode_tok_s", fake_decode)
    assert model_rows._paired_decode_tok_s(engine, base, quant, 100, 4, rounds=3) == (10.0, 30.0)
    assert seen == [base, quant] * 3 and engine.runner.model is base

    def failing(eng, vocab, num_tokens):
        raise RuntimeError("the decode produced fewer than two tokens")

    monkeypatch.setattr(model_rows, "_decode_tok_s", failing)
    engine.runner.model = quant
    with pytest.raises(RuntimeError):
        model_rows._paired_decode_tok_s(engine, base, quant, 100, 4, rounds=3)
    assert engine.runner.model is base


@pytest.mark.slow
def test_fp8_kv_cache_row_counts_bytes_per_token(tiny_section):
    row = _rows(tiny_section)["kv-fp8"]
    from triage.reference_engine.models.model_config import PRESETS

    mc = PRESETS["tiny"]
    per_layer_heads = 2 * mc.num_hidden_layers * mc.num_key_value_heads
    assert row["before"] == per_layer_heads * mc.head_dim * 4              # float32 cache
    assert row["after"] == per_layer_heads * (mc.head_dim + 4)             # e4m3 + an fp32 scale per head
    assert row["details"]["top1_agreement_frac"] >= 0.5


@pytest.mark.slow
def test_prefix_cache_row_hits_only_when_on(tiny_section):
    d = _rows(tiny_section)["prefix-cache"]["details"]
    assert d["prefix_cache_hit_frac"]["off"] == 0.0
    assert d["prefix_cache_hit_frac"]["on"] > 0.3


@pytest.mark.slow
def test_chunked_prefill_splits_the_long_prompt_only_when_on(tiny_section):
    rows = _rows(tiny_section)
    d = rows["chunked-prefill"]["details"]
    assert d["long_prompt_prefill_steps"]["off"] == 1
    # 96 prompt tokens through a 32-token budget shared with 2 decodes: at least 96 / 30 steps
    assert d["long_prompt_prefill_steps"]["on"] >= math.ceil(96 / 30)
    itl = rows["chunked-prefill-itl"]
    assert itl["metric"].startswith("ITL") and itl["before"] == d["itl_ms_p99"]["off"]


@pytest.mark.slow
def test_the_compile_row_times_both_steps_and_a_warm_cache_compiles_faster(tiny_section):
    row = _rows(tiny_section)["compile"]
    assert row["status"] == "measured" and row["decode_step"] == "eager → compiled", row["reason"]
    d = row["details"]
    assert set(d["decode_tok_s"]) == {"bs1", "bs2"} and d["buckets"] == [1, 2]
    for point in d["decode_tok_s"].values():
        assert point["eager"] > 0 and point["compiled"] > 0
        assert point["gain"] == pytest.approx(point["compiled"] / point["eager"])
    assert row["before"] == d["decode_tok_s"]["bs1"]["eager"] and row["after"] == d["decode_tok_s"]["bs1"]["compiled"]
    assert 0 < d["compile_s"]["warm_cache"] < d["compile_s"]["cold_cache"]
    others = [r for r in tiny_section["rows"] if r["key"] != "compile"]
    assert others and all(r["decode_step"] == "eager" for r in others)
    assert "decode step: eager in every row but 'eager → compiled decode step' (`triage serve --compile` compiles it)" \
        in tiny_section["tables"][0]["notes"]


def test_roofline_points_use_the_roofline_formula(tiny_section):
    roof = tiny_section["roofline"]
    assert [p["batch_size"] for p in roof["points"]] == list(TINY.roofline_batch_sizes)
    for p in roof["points"]:
        assert p["bandwidth_bytes_per_s"] > 0
        bound = decode_tokens_per_s_bound(p["batch_size"], p["bandwidth_bytes_per_s"], p["weight_bytes"],
                                          p["context_tokens"], p["kv_bytes_per_token"])
        assert p["bound_tokens_per_s"] == pytest.approx(bound)
        assert p["roofline_pct"] == pytest.approx(100 * p["decode_tokens_per_s"] / bound)
    targets = {t["name"]: t for t in tiny_section["targets"]}
    gpu_target = next(t for n, t in targets.items() if n.startswith("GPU decode"))
    if not torch.cuda.is_available():
        assert gpu_target["status"] == "not measured" and gpu_target["value"] is None


@pytest.mark.slow
def test_cli_baseline_quick_subset_writes_a_valid_report(tmp_path, report_validator):
    out = tmp_path / "b.json"
    runner = CliRunner()
    threads_before = torch.get_num_threads()
    res = runner.invoke(app, ["--no-color", "baseline", "--quick", "--model", "tiny", "--threads", "1",
                              "--rows", "kv-layout,fp4,cold-start,offload", "--json", str(out)],
                        env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    data = report_validator(json.loads(out.read_text()))
    assert [r["key"] for r in data["baseline"]["rows"]] == ["kv-layout", "fp4", "cold-start", "offload"]
    assert "Before / after on this host" in res.output
    assert "contiguous" in res.output and "skipped" in res.output
    assert data["baseline"]["config"]["num_threads"] == 1
    assert data["baseline"]["notes"][0] == "torch threads: 1, as asked (--threads)"
    assert torch.get_num_threads() == threads_before          # the process's setting is restored


@pytest.mark.parametrize("args,needle", [
    (["--rows", "warp-drive"], "unknown row"),
    (["--rows", ","], "--rows is empty"),
    (["--threads", "0"], "--threads"),
    (["--dtype", "int3"], "--dtype"),
    (["--model", "/nonexistent/model"], "neither a preset"),
])
def test_cli_bad_input_is_exit_2_with_a_message(args, needle):
    res = CliRunner().invoke(app, ["--no-color", "baseline", "--quick", *args])
    assert res.exit_code == 2
    assert needle in res.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cli_cuda_without_gpu_is_a_clear_error():
    res = CliRunner().invoke(app, ["--no-color", "baseline", "--quick", "--device", "cuda"])
    assert res.exit_code == 2 and "no CUDA GPU" in res.output


# --- pure pieces ---------------------------------------------------------------------------------

def test_gain_direction_follows_the_metric():
    up = measured("k", "c", None, "tok/s", "tok/s", Better.HIGHER, "a", 10.0, "b", 25.0)
    down = measured("k", "c", None, "ms", "ms", Better.LOWER, "a", 100.0, "b", 25.0)
    assert up.gain == pytest.approx(2.5) and down.gain == pytest.approx(4.0)
    assert measured("k", "c", None, "ms", "ms", Better.LOWER, "a", None, "b", 1.0).gain is None
    s = skipped("k", "c", None, "m", "why")
    assert s.status is RowStatus.SKIPPED and s.gain is None and s.reason == "why"


def test_percentile_interpolates_and_handles_empty():
    assert percentile([], 99) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)


def test_request_trace_tpot_and_itl():
    t = RequestTrace(arrival_s=1.0, token_times_s=[1.5, 1.6, 2.1, 2.2], finished=True)
    assert t.ttft_s == pytest.approx(0.5)
    assert t.tpot_s == pytest.approx(0.7 / 3)
    assert t.itls_s == pytest.approx([0.1, 0.5, 0.1])
    assert t.e2e_s == pytest.approx(1.2)
    assert RequestTrace(arrival_s=0.0).tpot_s is None
    assert not math.isnan(t.tpot_s)


def test_section_dict_round_trips_through_report_io(tiny_section):
    from triage.core.report_io import dumps, loads
    from triage.probes.host import host_info

    report = new_report(ReportKind.BASELINE, host_info(), Target(engine="reference", model="tiny"),
                        baseline=tiny_section)
    again = loads(dumps(report))
    assert to_dict(again)["baseline"]["rows"] == json.loads(json.dumps(tiny_section["rows"]))


def test_a_row_the_model_cannot_take_fails_alone_with_the_reason(tmp_path):
    """A local model whose max_position_embeddings is too short for the prefix row: that row fails,
    with the reason, and the other rows still run."""
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 20}))
    cfg = TINY.replace(model=str(tmp_path), rows=("prefix-cache", "fp4"), prefix_suffix_tokens=16)
    rows = _rows(run_baseline(cfg))
    assert rows["prefix-cache"]["status"] == "error"
    assert "max_position_embeddings (20) leaves no room for a shared prefix" in rows["prefix-cache"]["reason"]
    assert rows["fp4"]["status"] == "skipped"


def test_auto_dtype_is_reported_and_the_attention_row_runs_sliced_and_repeated():
    cfg = TINY.replace(dtype="auto", rows=("attention",), attention_num_layers=1, attention_repeats=2)
    section = run_baseline(cfg)
    assert section["dtype"] == "float32" and section["dtype_requested"] == "auto"
    assert section["dtype_note"].startswith("float32: ") and any(n.startswith("compute dtype: float32")
                                                                 for n in section["notes"])
    row = _rows(section)["attention"]
    d = row["details"]
    assert (d["num_layers"], d["num_layers_model"]) == (1, 2) and "1 of 2 layers" in row["metric"]
    assert all(len(runs) == 2 and min(runs) == d["ttft_ms"][b] for b, runs in d["ttft_runs_ms"].items())
    quick = BaselineConfig.quick()
    assert quick.dtype == "auto" and quick.attention_context_tokens == 4096 and quick.roofline_dtypes == ("auto",)
