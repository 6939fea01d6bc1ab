"""triage/plan: the calculator on the seeds' hand-computed cases, fleet and cost, and its inputs."""
import math

import pytest

from tests.factories import HOST
from triage.core.errors import ReportError, UsageError
from triage.core.report import Report, ReportKind
from triage.core.report_io import write_report
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.plan.fleet_size import e2e_at_load
from triage.plan.inputs import dtype_from_server
from triage.plan.section import RawOptions, build_plan, plan_section, resolve_inputs

GIB = 2**30


def plan(**kw):
    return build_plan(resolve_inputs(RawOptions(**kw)))


def tp_row(p, tp):
    return next(r for r in p["tp_options"] if r["tp"] == tp)


def test_70b_fp16_does_not_fit_one_h100_and_needs_two():
    p = plan(model="llama-3.1-70b", gpu="h100-sxm", dtype="fp16")
    assert p["model"]["weight_bytes"] / 1e9 == pytest.approx(141.1, abs=0.1)   # "70B at FP16 is 140 GB"
    one = tp_row(p, 1)
    assert not one["weights_fit"] and not one["can_start"]
    assert "exceed" in one["reason"]
    # Seed 000: "70B FP16 -> 2x H100 SXM5". TP 2 holds the weights (65.7 GiB each) with a few GiB of
    # KV; TP 4 has several times the room.
    two, four = tp_row(p, 2), tp_row(p, 4)
    assert two["headroom_ok"] and two["kv_budget_bytes_per_gpu"] < 6 * GIB
    assert four["kv_capacity_tokens"] > 5 * two["kv_capacity_tokens"]
    assert p["recommended_tp"] == 2 and p["memory"]["tp"] == 2


def test_70b_fp8_fits_one_h100_with_little_kv_room():
    p = plan(model="llama-3.1-70b", gpu="h100-sxm", dtype="fp8", tp=1)
    m = p["memory"]
    assert m["weights_fit"] and m["can_start"] and m["fits"]
    assert p["model"]["weight_bytes"] / 1e9 == pytest.approx(72.7, abs=0.1)   # bf16 embeddings kept
    # A few GiB of KV: fewer than 16 planned sequences, a handful of 4K users.
    assert 0 < m["kv_budget_bytes_per_gpu"] < 3 * GIB
    assert not m["headroom_ok"]
    assert m["kv_capacity_tokens"] // 4096 < 4
    assert any("little KV room" in w for w in p["warnings"])
    # vLLM would refuse the model's own 128K max-model-len: the plan lowers it and says so.
    assert m["max_model_len"] < 131072 and m["max_model_len"] % 1024 == 0
    assert any("--max-model-len" in w for w in p["warnings"])


def test_7b_fp16_is_14_gb_and_fits_a_4090():
    p = plan(model="mistral-7b", gpu="rtx-4090", dtype="fp16", tp=1)
    assert p["model"]["weight_bytes"] / 1e9 == pytest.approx(14.5, abs=0.1)
    assert p["memory"]["weights_fit"]


def test_kv_capacity_matches_the_budget_arithmetic():
    p = plan(model="llama-3.1-8b", gpu="h100-sxm")
    m = p["memory"]
    budget = 0.92 * 80 * GIB  # vLLM 0.31+ default (vllm/config/cache.py), the newest tabled release
    assert m["budget_bytes_per_gpu"] == pytest.approx(budget)
    kv_room = budget - m["weight_bytes_per_gpu"] - m["activation_bytes_per_gpu"] - m["overhead_bytes_per_gpu"]
    assert m["kv_budget_bytes_per_gpu"] == pytest.approx(kv_room)
    assert m["kv_capacity_tokens"] == int(kv_room // (128 * 1024))
    assert m["kv_capacity_seqs"] == int(kv_room // (128 * 1024 * 1280))
    # An fp8 KV cache holds twice the tokens.
    p8 = plan(model="llama-3.1-8b", gpu="h100-sxm", kv_cache_dtype="fp8")
    assert p8["memory"]["kv_capacity_tokens"] == pytest.approx(2 * m["kv_capacity_tokens"], abs=1)


def test_decode_roofline_8b_on_h100_is_about_200_tok_s():
    # Seed 001: "At batch=1, an H100 pushes ~200 tok/s from an 8B model".
    p = plan(model="llama-3.1-8b", gpu="h100-sxm")
    s = p["speed"]
    bs1 = s["decode_bs1"]
    assert bs1["limited_by"] == "memory"
    assert 190 < bs1["bound_tokens_per_s"] < 215
    # The plan's bound equals the formula B x BW / (W + B x ctx x kv) at B = 1.
    assert bs1["bound_tokens_per_s"] == pytest.approx(s["decode_bs1_memory_formula_tokens_per_s"])
    assert bs1["expected_tokens_per_s"] == pytest.approx(0.7 * bs1["bound_tokens_per_s"])
    batch = s["decode_at_batch"]
    # vLLM's default --max-num-seqs on an H100 is 1024 (issue 24, defect 8): the KV cache (359 sequences of
    # this shape) is what caps the batch, not a 256 that vLLM no longer uses there.
    assert batch["batch_size"] == 359 and p["inputs"]["max_num_seqs"] == 1024
    assert batch["bound_tokens_per_s"] > 50 * bs1["bound_tokens_per_s"]


def test_prefill_ttft_is_compute_bound_at_1k_tokens():
    p = plan(model="llama-3.1-8b", gpu="h100-sxm", input_len=1024)
    pf = p["speed"]["prefill"]
    assert pf["limited_by"] == "compute"
    flops = 2 * 8_030_261_248 * 1024 + 2 * 32 * 32 * 256 * (1024 * 1025 / 2)
    assert pf["flops"] == pytest.approx(flops)
    assert pf["bound_ttft_ms"] == pytest.approx(flops / 989.4e12 * 1e3)
    assert pf["expected_ttft_ms"] == pytest.approx(2 * pf["bound_ttft_ms"])     # --mfu 0.5


def test_mla_kv_is_replicated_across_tp():
    p = plan(model="deepseek-v3", gpu="h200", dtype="fp8")
    assert p["memory"]["tp"] == 8
    per_token = 61 * 576 * 2
    assert p["memory"]["kv_bytes_per_token_per_gpu"] == per_token
    assert any("MLA" in w for w in p["warnings"])


def test_gqa_kv_splits_over_tp_until_one_head_per_gpu():
    # Llama 8B has 8 KV heads: TP 8 splits them 8 ways (16 KiB/token/GPU).
    p = plan(model="llama-3.1-8b", gpu="l4", tp=8)
    assert p["memory"]["kv_bytes_per_token_per_gpu"] == 128 * 1024 / 8
    # Qwen2.5-7B has 4 KV heads: at TP 4 and beyond, each GPU keeps one head's worth.
    p = plan(model="qwen2.5-7b", gpu="l4", tp=4)
    assert p["memory"]["kv_bytes_per_token_per_gpu"] == 57344 / 4
    assert tp_row(p, 8)["kv_bytes_per_token_per_gpu"] == 57344 / 4


def test_moe_decode_reads_only_active_experts_at_batch_1():
    p = plan(model="qwen3-30b-a3b", gpu="h100-sxm")
    bs1 = p["speed"]["decode_bs1"]
    # ~3.3B active params in bf16 ~ 7 GB per token (not the 61 GB total).
    assert bs1["step_bytes_per_gpu"] < 10e9
    assert p["model"]["weight_bytes"] > 60e9


def test_fleet_little_law_and_cost_by_hand():
    p = plan(model="llama-3.1-8b", gpu="h100-sxm", qps=50, price_per_gpu_hour=2.0, api_price_per_mtok=1.0)
    f, c = p["fleet"], p["cost"]
    assert f["num_replicas"] == math.ceil(50 * 1.25 / f["replica_requests_per_s"])
    assert f["num_gpus"] == f["num_replicas"] * f["gpus_per_replica"]
    assert f["e2e_s_at_full_load"] == pytest.approx(f["batch_per_replica"] / f["replica_requests_per_s"])
    assert f["in_flight_at_target"] == pytest.approx(50 * f["e2e_s_at_target"])
    assert f["e2e_s_at_target"] <= f["e2e_s_at_full_load"]
    tok_s = f["replica_output_tokens_per_s"]
    assert c["cost_per_mtok_at_batch"] == pytest.approx(2.0 / (tok_s * 3600) * 1e6)
    assert c["cost_per_mtok_at_bs1"] > 10 * c["cost_per_mtok_at_batch"]
    # Break-even: $2/h buys 2M API tokens per hour = 555.6 output tok/s.
    assert c["break_even_output_tokens_per_s"] == pytest.approx(2e6 / 3600)
    assert c["break_even_qps"] == pytest.approx(2e6 / 3600 / 256)
    assert c["break_even_mtok_per_month"] == pytest.approx(2 * 730)
    assert c["break_even_reachable"] is True
    api_hour = 50 * 256 * 3600 / 1e6 * 1.0
    assert c["savings_per_month_at_target"] == pytest.approx((api_hour - f["num_gpus"] * 2.0) * 730)


def test_break_even_unreachable_when_api_is_cheap():
    p = plan(model="llama-3.1-8b", gpu="h100-sxm", price_per_gpu_hour=10.0, api_price_per_mtok=0.001)
    assert p["cost"]["break_even_reachable"] is False


def test_concurrency_sizes_replicas_by_kv_allowed_batch():
    p = plan(model="llama-3.1-70b", gpu="h100-sxm", dtype="fp8", concurrency=1000)
    f = p["fleet"]
    assert f["num_replicas"] == math.ceil(1000 * 1.25 / f["batch_per_replica"])


def test_no_cost_without_a_price_and_no_fleet_without_traffic():
    p = plan(model="qwen3-8b", gpu="l40s")
    assert p["cost"] is None and p["fleet"]["num_replicas"] is None


def test_e2e_at_load_grows_with_load():
    def parts(b):                       # memory-bound steps: 10 ms + 0.1 ms per sequence
        return 0.01 + 0.0001 * b, 0.001 * b / 10
    light = e2e_at_load(0.01, 0.05, 0.02, 100, parts, 64, 100.0)
    heavy = e2e_at_load(5.0, 0.05, 0.02, 100, parts, 64, 100.0)
    assert light == pytest.approx(0.05 + 100 * 0.0101, rel=1e-3)
    assert heavy > light
    # Self-consistent: the batch Little's law implies gives back the same latency.
    b = math.ceil(5.0 * heavy)
    assert heavy == pytest.approx(0.05 + 100 * max(parts(b)[0], parts(b)[1] / (1 - 5.0 * 0.02)), rel=0.02)
    assert e2e_at_load(100.0, 0.05, 0.02, 100, parts, 64, 42.0) == 42.0       # prefill alone saturates
    assert e2e_at_load(50.0, 0.05, 0.001, 100, parts, 64, 42.0) == 42.0       # more in flight than fit


def test_vllm_flags():
    p = plan(model="llama-3.1-70b", gpu="h100-sxm", dtype="fp8", kv_cache_dtype="fp8", tp=2,
             max_model_len=16384, gpu_memory_utilization=0.92)
    flags = p["vllm_flags"]

    def val(name):
        return flags[flags.index(name) + 1]

    # vLLM 0.33's fp8 method refuses a 16-bit checkpoint; online FP8 is fp8_per_tensor there (claim
    # vllm.fp8-config-no-online): the plan asks the engine's knob at the planned release.
    assert val("--tensor-parallel-size") == "2" and val("--quantization") == "fp8_per_tensor"
    assert val("--kv-cache-dtype") == "fp8" and val("--max-model-len") == "16384"
    assert val("--gpu-memory-utilization") == "0.92"
    assert int(val("--max-num-seqs")) % 8 == 0 and int(val("--max-num-seqs")) <= 1024
    assert p["vllm_command"].startswith("vllm serve meta-llama/Llama-3.1-70B-Instruct ")
    # Never advise enabling what current vLLM already has on: only a note for vLLM < 0.8.
    assert "--enable-prefix-caching" not in flags and "--enable-chunked-prefill" not in flags
    assert any("vLLM >= 0.8" in n and "--enable-chunked-prefill" in n for n in p["vllm_notes"])
    p4 = plan(model="llama-3.1-8b", gpu="l4", dtype="int4")
    assert "--quantization" not in p4["vllm_flags"]
    assert any("AWQ or GPTQ" in n for n in p4["vllm_notes"])


def test_sliding_window_model_is_never_bounded_by_one_sequence():
    p = plan(model="mistral-7b-v0.1", gpu="rtx-4090", tp=1)
    assert p["memory"]["max_seq_tokens"] is None
    assert p["memory"]["max_model_len"] == 32768


def test_no_fit_at_any_tp_says_what_to_do():
    p = plan(model="llama-3.1-405b", gpu="h100-sxm", qps=1, price_per_gpu_hour=2.0)
    assert p["recommended_tp"] is None and not p["memory"]["fits"]
    assert any("does not fit" in w and "fp8" in w for w in p["warnings"])
    # No fleet, cost or command for a configuration vLLM would not start.
    assert p["fleet"] is None and p["cost"] is None and p["vllm_command"] is None
    # Seed 000: 405B at FP8 runs on 8x H100.
    assert plan(model="llama-3.1-405b", gpu="h100-sxm", dtype="fp8")["recommended_tp"] == 8


def test_custom_gpu_and_overrides():
    p = plan(model="llama-3.1-8b", vram_gb=48, bandwidth_tbs=1.0, tflops=200)
    assert p["gpu"]["key"] == "custom" and p["gpu"]["kind"] == "user-given"
    assert p["speed"]["decode_bs1"]["bound_tokens_per_s"] == pytest.approx(
        1e12 / p["speed"]["decode_bs1"]["step_bytes_per_gpu"])
    over = plan(model="llama-3.1-8b", gpu="h100-sxm", bandwidth_tbs=2.0)
    assert over["gpu"]["hbm_bandwidth_bytes_per_s"] == 2e12 and "overridden" in over["gpu"]["source"]


@pytest.mark.parametrize(("kw", "match"), [
    ({"gpu": "tpu-v5"}, "h100-sxm, h100-pcie"),
    ({"gpu": "h100", "dtype": "fp6"}, "bf16, fp16, fp8, int8, int4"),
    ({"gpu": "h100", "kv_cache_dtype": "int2"}, "fp8_e5m2"),
    ({"gpu": "h100", "tp": 3}, "does not divide"),
    ({"gpu": "h100", "gpu_memory_utilization": 1.5}, "gpu-memory-utilization"),
    ({"gpu": "h100", "input_len": 0}, "input-len"),
    ({"gpu": "h100", "qps": -1.0}, "qps"),
    ({}, "no GPU given"),
    ({"vram_gb": 24}, "missing --bandwidth-tbs, --tflops"),
])
def test_bad_input_is_a_usage_error(kw, match):
    with pytest.raises(UsageError, match=match):
        resolve_inputs(RawOptions(model="llama-3.1-8b", **kw))


def _diagnose_report(tmp_path, gpu_name="NVIDIA H100 80GB HBM3", server=None, gpu_status=ProbeStatus.OK):
    mem = 81559 * 2**20
    gpus = [{"index": i, "name": gpu_name, "memory_total_bytes": mem} for i in range(4)]
    probes = [ProbeResult("gpu", gpu_status, 0.2, None if gpu_status is ProbeStatus.OK else "no NVML",
                          {"gpus": gpus} if gpu_status is ProbeStatus.OK else {})]
    if server is not None:
        probes.append(ProbeResult("server_config", ProbeStatus.OK, 0.1, None, server))
    report = Report(kind=ReportKind.DIAGNOSE, triage_version="0.1.0", created_at="2026-11-21T12:00:00Z",
                    command=("triage", "diagnose"), host=HOST, probes=tuple(probes))
    return write_report(report, tmp_path / "diagnose.json")


def test_from_diagnose_fills_gpu_and_server_config(tmp_path):
    server = {"engine": "vllm", "model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 8192,
              "gpu_memory_utilization": 0.85, "tensor_parallel_size": 1, "dtype": "bfloat16",
              "quantization": "fp8", "kv_cache_dtype": "fp8", "max_num_seqs": 128}
    path = _diagnose_report(tmp_path, server=server)
    inputs = resolve_inputs(RawOptions(from_diagnose=path))
    assert inputs.model.name == "llama-3.1-8b"
    assert inputs.gpu.key == "h100-sxm" and inputs.gpu.vram_bytes == 81559 * 2**20
    assert (inputs.dtype, inputs.kv_cache_dtype, inputs.tp) == ("fp8", "fp8", 1)
    assert (inputs.max_model_len, inputs.gpu_memory_utilization, inputs.max_num_seqs) == (8192, 0.85, 128)
    assert inputs.num_gpus_available == 4
    assert inputs.sources["gpu"] == "diagnose" and inputs.sources["dtype"] == "diagnose"
    # A flag beats the report.
    flagged = resolve_inputs(RawOptions(from_diagnose=path, tp=2, gpu="h200"))
    assert (flagged.tp, flagged.gpu.key, flagged.sources["tp"]) == (2, "h200", "flag")


def test_from_diagnose_with_unknown_gpu_or_model_asks_for_flags(tmp_path):
    path = _diagnose_report(tmp_path, gpu_name="NVIDIA GeForce GTX 1080",
                            server={"model": "someone/private-model"})
    with pytest.raises(UsageError, match="private-model"):
        resolve_inputs(RawOptions(from_diagnose=path))
    with pytest.raises(UsageError, match="no GPU given"):
        resolve_inputs(RawOptions(from_diagnose=path, model="llama-3.1-8b"))
    ok = resolve_inputs(RawOptions(from_diagnose=path, model="llama-3.1-8b", gpu="l4"))
    assert ok.gpu.key == "l4"
    assert any("not in the spec table" in n for n in ok.notes)


def test_from_diagnose_refuses_a_wrongly_typed_server_value_naming_it(tmp_path):
    # triage never writes max_model_len="auto" (the payload types it as an integer): a report that has one was
    # edited or corrupted, and reading it stops with one line naming the field (the hostile-input issue).
    path = _diagnose_report(tmp_path, server={"model": "Qwen/Qwen3-8B", "max_model_len": "auto",
                                              "tensor_parallel_size": 2})
    with pytest.raises(ReportError, match=r"max_model_len: 'auto' is not of type"):
        resolve_inputs(RawOptions(from_diagnose=path))


def test_from_diagnose_without_a_gpu_probe(tmp_path):
    path = _diagnose_report(tmp_path, gpu_status=ProbeStatus.UNSUPPORTED)
    inputs = resolve_inputs(RawOptions(from_diagnose=path, model="qwen3-8b", gpu="l40s"))
    assert any("unsupported" in n for n in inputs.notes)


def test_from_diagnose_missing_file_is_a_report_error(tmp_path):
    with pytest.raises(ReportError, match="no such file"):
        resolve_inputs(RawOptions(from_diagnose=tmp_path / "nope.json", model="qwen3-8b", gpu="l4"))


@pytest.mark.parametrize(("server", "dtype"), [
    ({"quantization": "awq_marlin"}, "int4"), ({"quantization": "gptq"}, "int4"),
    ({"quantization": "fp8"}, "fp8"), ({"dtype": "float16"}, "fp16"), ({"dtype": "auto"}, "bf16"),
    ({"quantization": "compressed-tensors"}, None), ({}, None),
])
def test_dtype_from_server_config(server, dtype):
    assert dtype_from_server(server) == dtype


def test_section_has_tables_for_the_generic_renderer():
    section = plan_section(RawOptions(model="llama-3.1-8b", gpu="h100-sxm", qps=5, price_per_gpu_hour=2.5))
    titles = [t["title"] for t in section["tables"]]
    assert titles[:2] == ["Model: llama-3.1-8b", "Memory per GPU: TP 1 on NVIDIA H100 SXM5 80GB"]
    assert "Start vLLM with" in titles
    for t in section["tables"]:
        assert all(len(row) == len(t["columns"]) for row in t["rows"])


@pytest.mark.parametrize("gpu, seqs", [("h100-sxm", 1024), ("h200", 1024), ("a100-80gb", 256), ("l4", 256),
                                       ("b200", 1024)])
def test_the_max_num_seqs_assumed_is_vllms_own_default_for_the_gpu(gpu, seqs):
    """vLLM's get_batch_defaults (claims vllm.max-num-seqs-1024 / -256): 1024 on GPUs of >= 70 GiB other than
    the A100, 256 elsewhere."""
    p = plan(model="llama-3.1-8b", gpu=gpu)
    assert p["inputs"]["max_num_seqs"] == seqs
