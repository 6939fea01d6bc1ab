"""The engine-truth issue's numbered defects, each pinned to what the engine's source says (the tables in
triage/engines/truth/). Before the tables, triage printed the wrong thing in every one of these."""
from __future__ import annotations

import triage.engines.truth as truth
from triage.rules.engine_flags import engine_flags
from triage.rules.engine_info import DISABLING_FLAGS


def test_1_swap_space_is_gone_from_vllm_0_18_and_never_suggested():
    assert truth.flag("vllm", "--swap-space", "0.17.1") is not None
    assert truth.flag("vllm", "--swap-space", "0.18.0") is None
    from triage.rules import REGISTRY

    assert "--swap-space" not in REGISTRY.get("MEM002").doc.fix.split("`--swap-space` was removed")[0]


def test_2_int4_has_no_ready_command_for_a_16_bit_model():
    for engine in ("vllm", "sglang", "tgi"):
        cmds, note = engine_flags({"quantization_int4": None}, engine)
        assert cmds == () and "pre-quantized" in note


def test_3_tgi_kv_room_never_lowers_its_memory_fraction():
    cmds, note = engine_flags({"gpu_memory_utilization": 0.92}, "tgi")
    assert cmds == ("--cuda-memory-fraction 1.0",) and "default is 1.0" in note


def test_4_tgi_batch_cap_is_max_batch_size_not_max_concurrent_requests():
    from triage.rules.engine_info import EngineInfo

    # TGI 2.x without prefill chunking: --max-batch-size bounds the batch. (3.x ignores it: test_engine_audit.)
    cmds, _ = engine_flags({"max_num_seqs": 256}, EngineInfo("tgi", "2.4.1"))
    assert cmds == ("--max-batch-size 256",)


def test_5_vllm_memory_default_is_read_per_version():
    assert truth.default("vllm", "gpu_memory_utilization", "0.8.5")[0] == 0.9
    assert truth.default("vllm", "gpu_memory_utilization", "0.33.0")[0] == 0.92


def test_9_tgi_has_no_chunked_prefill_switch():
    assert "tgi" not in DISABLING_FLAGS["chunked_prefill"]


def test_6_flash_attention_boundaries_come_from_the_tables_not_the_seed():
    # FA3 on Hopper from the first V1 release in the tables, FA4 on SM100 much later: not "0.17 for both".
    assert truth.first_with("vllm", "flash_attn_3_on_sm90") == "0.8.5"
    assert truth.first_with("vllm", "flash_attn_4_on_sm100") == "0.17.1"
    assert truth.default("vllm", "flash_attn_3_on_sm90", "0.11.2")[0] is True
    assert truth.default("vllm", "flash_attn_4_on_sm100", "0.11.2")[0] is False
    from triage.rules import REGISTRY

    doc = REGISTRY.get("ENG005").doc
    assert "vLLM < 0.17" not in doc.what and "0.17" not in doc.fix   # the seed's boundary is gone
    # (tests/fixtures/rules/ENG005: vLLM 0.11 on an H100 is quiet; on a B200 it names 0.17.1)


def _plan(**kw):
    from triage.plan.section import RawOptions, build_plan, resolve_inputs

    return build_plan(resolve_inputs(RawOptions(**kw)))


def test_7_plan_kv_cache_dtype_is_spelled_the_way_vllm_accepts_it():
    newest = truth.table("vllm")
    assert newest.check("--kv-cache-dtype", "bf16") is not None   # vLLM rejects triage's short name
    p = _plan(model="llama-3.1-8b", gpu="h100-sxm", dtype="fp16", kv_cache_dtype="bf16")
    flags = p["vllm_flags"]
    assert "bf16" not in flags and flags[flags.index("--kv-cache-dtype") + 1] == "bfloat16"
    assert newest.check("--kv-cache-dtype", "bfloat16") is None
    i = 0
    while i < len(flags):     # every flag of the command is accepted by the newest table
        spec = newest.flag(flags[i])
        value = flags[i + 1] if spec is not None and spec.takes_value else None
        assert newest.check(flags[i], value) is None, flags[i:i + 2]
        i += 2 if value is not None else 1


def test_8_no_fp8_dtype_is_ever_suggested():
    assert truth.table("vllm").check("--dtype", "fp8") is not None
    p = _plan(model="llama-3.1-405b", gpu="l4", dtype="bf16")
    text = " ".join(p.get("warnings", [])) + " ".join(p.get("vllm_notes", []))
    assert "does not fit" in text
    assert "--dtype fp8" not in text and "--quantization fp8" in text


def test_10_sglang_eager_is_read_from_every_spelling_the_source_has():
    from triage.probes.server_config import parse_flags

    assert truth.flag("sglang", "--disable-decode-cuda-graph", "0.5.23") is not None
    assert "disabled" in truth.flag("sglang", "--cuda-graph-backend-decode", "0.5.23").choices
    for argv in (["--disable-cuda-graph"], ["--disable-decode-cuda-graph"],
                 ["--cuda-graph-backend-decode", "disabled"], ["--cuda-graph-backend-decode=disabled"]):
        assert parse_flags(argv, "sglang")[0].get("enforce_eager") is True, argv
    assert parse_flags(["--cuda-graph-backend-decode", "full"], "sglang")[0].get("enforce_eager") is False


def test_11_sglang_spec_accept_rate_is_read_and_reaches_eng003():
    from tests.rule_cases._build import cfg, metrics, snapshot
    from triage.probes.metrics_window import window_delta
    from triage.probes.prom import normalise, parse_metrics

    assert "sglang:spec_accept_rate" in truth.metric_names("sglang", "0.5.10")
    text = ('# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate{model_name="m"} 0.31\n'
            '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="m"} 4\n')
    before = normalise(parse_metrics(text))
    data = window_delta(before, before, 5.0)
    assert data.spec_decode_acceptance_rate == 0.31
    from triage.rules import RulesConfig, evaluate

    snap = snapshot(cfg(engine="sglang", engine_version="0.5.10", speculative_config="EAGLE"),
                    metrics(engine="sglang", spec_decode_acceptance_rate=data.spec_decode_acceptance_rate))
    result = evaluate(snap, config=RulesConfig(enabled_only=frozenset({"ENG003"})))
    assert [f.code for f in result.findings] == ["ENG003"], result.skipped
