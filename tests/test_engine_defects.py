"""The engine-truth issue's numbered defects, each pinned to what the engine's source says (the tables in
triage/core/engine_truth/). Before the tables, triage printed the wrong thing in every one of these."""
from __future__ import annotations

import triage.core.engine_truth as truth
from triage.rules.engine_flags import engine_flags
from triage.rules.engines import DISABLING_FLAGS


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
    cmds, _ = engine_flags({"max_num_seqs": 256}, "tgi")
    assert cmds == ("--max-batch-size 256",)


def test_5_vllm_memory_default_is_read_per_version():
    assert truth.default("vllm", "gpu_memory_utilization", "0.8.5")[0] == 0.9
    assert truth.default("vllm", "gpu_memory_utilization", "0.33.0")[0] == 0.92


def test_9_tgi_has_no_chunked_prefill_switch():
    assert "tgi" not in DISABLING_FLAGS["chunked_prefill"]
