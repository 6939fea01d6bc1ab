"""Quantized linear layers: error bounds, fast path == reference path, handlers, AWQ/GPTQ import."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from tests.quant_helpers import load_quantized_engine, pack_awq, pack_gptq
from triage.reference_engine.layers.quant import (
    Fp8Linear,
    Int4Linear,
    QuantScheme,
    dequantize_fp8,
    dequantize_int4,
    model_weight_bytes,
    quantize_fp8_per_channel,
    quantize_int4_groupwise,
    quantize_model,
)
from triage.reference_engine.layers.quant.awq_gptq import (
    QuantCheckpointError,
    convert_awq,
    convert_gptq,
    load_quantized_checkpoint,
)
from triage.reference_engine.layers.quant.int4 import int4pack_cpu_available
from triage.reference_engine.layers.quant.kv_fp8 import dequantize_kv, quantize_kv


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_fp8_per_channel_roundtrip_error_is_within_e4m3_precision():
    w = torch.randn(64, 256) * torch.logspace(-2, 1, 64)[:, None]  # very different row magnitudes
    q, scale = quantize_fp8_per_channel(w)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (64,)
    back = dequantize_fp8(q, scale, torch.float32)
    # e4m3 has 3 mantissa bits: relative rounding error ≤ 2^-4 for normal values.
    rel = ((back - w).abs() / w.abs().amax(dim=1, keepdim=True)).amax()
    assert rel <= 2 ** -4 + 1e-6
    # Per-channel: the small rows are as precise as the big ones (a per-tensor scale would fail this).
    assert ((back[0] - w[0]).abs().max() / w[0].abs().max()) <= 2 ** -4 + 1e-6


def test_fp8_linear_matches_dense_layer_closely():
    lin = nn.Linear(128, 48, bias=True)
    x = torch.randn(5, 7, 128)
    fp8 = Fp8Linear.from_linear(lin)
    assert fp8.path == "dequant"  # no Hopper GPU on a CPU host
    got, ref = fp8(x), lin(x)
    assert got.shape == ref.shape
    assert (got - ref).abs().max() / ref.abs().max() < 0.05
    assert fp8.weight_bytes() == 128 * 48 + 48 * 4


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_int4_groupwise_dequant_error_is_at_most_half_a_step(group_size):
    w = torch.randn(32, 256)
    qw = quantize_int4_groupwise(w, group_size)
    assert qw.q.dtype == torch.uint8 and int(qw.q.max()) <= 15
    assert qw.scale.shape == (32, 256 // group_size)
    back = dequantize_int4(qw, torch.float32)
    step = qw.scale.repeat_interleave(group_size, dim=1)
    assert bool(((back - w).abs() <= step / 2 + 1e-5).all())


@pytest.mark.skipif(not int4pack_cpu_available(), reason="this torch lacks the CPU int4pack ops")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_int4_cpu_fast_path_equals_reference_path(dtype, group_size):
    lin = nn.Linear(256, 96, bias=False).to(dtype)
    fast = Int4Linear.from_linear(lin, group_size)
    ref = Int4Linear.from_linear(lin, group_size, path="reference")
    assert fast.path == "int4pack_cpu" and ref.path == "reference"
    x = torch.randn(3, 256, dtype=dtype)
    got, want = fast(x).float(), ref(x).float()
    tol = 1e-3 if dtype == torch.float32 else 0.05
    assert (got - want).abs().max() / want.abs().max() < tol
    # ~4.25 bits per weight with bf16 scale+zero per group of 128 (less with smaller groups)
    assert fast.weight_bytes() == 96 * 256 // 2 + (256 // group_size) * 96 * 2 * lin.weight.element_size()


def test_int4_rejects_unsupported_group_size():
    with pytest.raises(ValueError, match="group size"):
        quantize_int4_groupwise(torch.randn(8, 96), 48)
    with pytest.raises(ValueError, match="multiple"):
        quantize_int4_groupwise(torch.randn(8, 96), 64)


class _TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 128)
        self.up = nn.Linear(128, 256)
        self.down = nn.Linear(256, 128)
        self.odd = nn.Linear(128, 40)   # fits int4 (in=128)
        self.tiny = nn.Linear(40, 8)    # in=40 does not fit any group: stays dense under int4

    def forward(self, ids):
        h = self.emb(ids)
        return self.tiny(self.odd(self.down(torch.relu(self.up(h)))))


@pytest.mark.parametrize("scheme,ratio_min", [("fp8", 1.6), ("int4", 2.5)])
def test_handlers_swap_linears_and_shrink_weights(scheme, ratio_min):
    model = _TwoLayer()
    ids = torch.randint(0, 50, (2, 6))
    ref = model(ids)
    before = model_weight_bytes(model)
    summary = quantize_model(model, scheme, group_size=64, cpu_kernel="off")   # torch's paths
    assert summary.weight_bytes_before == before
    assert summary.weight_bytes_after == model_weight_bytes(model) < before
    linear_bytes = sum(m.weight.numel() * 4 for m in [nn.Linear(128, 256), nn.Linear(256, 128)])
    assert before - summary.weight_bytes_after > linear_bytes * (1 - 1 / ratio_min)
    if scheme == "int4":
        assert summary.num_layers_converted == 3 and summary.num_layers_skipped == 1
        dense = (128 * 256 + 256 * 128 + 128 * 40) * 4                      # fp32 weights of the 3 layers
        packed = (128 * 256 + 256 * 128 + 128 * 40) // 2                    # 4 bits each
        scales = ((256 * 128 // 64) + (128 * 256 // 64) + (40 * 128 // 64)) * 2 * 4   # fp32 scale + zero
        assert summary.linear_bytes_before == dense
        assert summary.linear_bytes_after == packed + scales
        assert type(model.tiny) is nn.Linear and isinstance(model.up, Int4Linear)
        # out=40 is not a multiple of 16, which the CPU packed kernel needs: that layer falls back.
        if int4pack_cpu_available():
            assert summary.paths == {"int4pack_cpu": 2, "reference": 1}
    else:
        assert summary.num_layers_converted == 4
    out = model(ids)
    assert (out - ref).abs().max() / ref.abs().max() < 0.25


def test_quantize_model_rejects_unknown_scheme():
    with pytest.raises(ValueError, match="unknown quantization"):
        quantize_model(_TwoLayer(), "int3")
    assert quantize_model(_TwoLayer(), QuantScheme.NONE).num_layers_converted == 0


def test_tied_weights_are_counted_once():
    m = nn.Module()
    m.emb = nn.Embedding(10, 16)
    m.head = nn.Linear(16, 10, bias=False)
    m.head.weight = m.emb.weight
    assert model_weight_bytes(m) == 10 * 16 * 4


# --- AWQ / GPTQ import, on tensors packed here ---------------------------------------------------

def _int_quant(w: torch.Tensor, g: int):
    """Reference asymmetric integer quantization: q [K, N], zeros [G, N], scales [G, N] (fp16)."""
    n, k = w.shape
    wg = w.t().reshape(k // g, g, n)
    mx, mn = wg.amax(1), wg.amin(1)
    scales = ((mx - mn) / 15).clamp(min=1e-5).half()
    zeros = (-mn / scales.float()).round().clamp(0, 15).to(torch.int32)
    q = (wg / scales.float()[:, None] + zeros[:, None]).round().clamp(0, 15).to(torch.int32).reshape(k, n)
    return q, zeros, scales


def _int_dequant(q, zeros, scales, g):
    k = q.shape[0]
    gi = torch.arange(k) // g
    return ((q - zeros[gi]).float() * scales.float()[gi]).t()  # [N, K]


@pytest.mark.parametrize("v2", [False, True])
def test_gptq_unpack_and_zero_conversion(v2):
    g = 32
    w = torch.randn(64, 128)
    q, zeros, scales = _int_quant(w, g)
    zeros[0, 0] = 0  # the v1 "z - 1" storage wraps to -1 here; import must undo it
    qweight, qzeros = pack_gptq(q, zeros, v2=v2)
    assert qweight.dtype == torch.int32 and qweight.shape == (128 // 8, 64) and qzeros.shape == (4, 64 // 8)
    imported = convert_gptq(qweight, qzeros, scales, g, g_idx=torch.arange(128) // g, v2=v2)
    assert imported.input_perm is None
    assert torch.allclose(dequantize_int4(imported.weights), _int_dequant(q, zeros, scales, g), atol=1e-5)


def test_gptq_act_order_is_reordered_and_applied_to_the_input():
    g, k, n = 32, 128, 64
    w = torch.randn(n, k)
    perm_true = torch.randperm(k)                     # the order GPTQ quantized the columns in
    g_idx = torch.empty(k, dtype=torch.int32)
    g_idx[perm_true] = (torch.arange(k) // g).to(torch.int32)
    # Quantize each group (a scattered set of columns) the way GPTQ act-order does.
    q = torch.empty(k, n, dtype=torch.int32)
    zeros = torch.empty(k // g, n, dtype=torch.int32)
    scales = torch.empty(k // g, n, dtype=torch.float16)
    for gi in range(k // g):
        cols = (g_idx == gi).nonzero().squeeze(1)
        qq, zz, ss = _int_quant(w[:, cols], g)
        q[cols], zeros[gi], scales[gi] = qq, zz[0], ss[0]
    dense = ((q - zeros[g_idx.long()]).float() * scales.float()[g_idx.long()]).t()  # [N, K]
    qweight, qzeros = pack_gptq(q, zeros)
    imported = convert_gptq(qweight, qzeros, scales, g, g_idx=g_idx)
    assert imported.input_perm is not None
    layer = Int4Linear(imported.weights, None, torch.device("cpu"), input_perm=imported.input_perm,
                       scale_dtype=torch.float32)
    x = torch.randn(3, k)
    assert torch.allclose(layer(x), x @ dense.t(), atol=1e-3, rtol=1e-3)


def test_awq_unpack_undoes_the_interleave_and_zero_points():
    g = 64
    w = torch.randn(64, 128)
    q, zeros, scales = _int_quant(w, g)
    qweight, qzeros = pack_awq(q, zeros)
    assert qweight.shape == (128, 64 // 8) and qzeros.shape == (2, 64 // 8)
    # The interleave is real: the first word's second nibble holds column 2, not column 1.
    assert int(qweight[0, 0]) >> 4 & 0xF == int(q[0, 2])
    imported = convert_awq(qweight, qzeros, scales, g)
    assert torch.allclose(dequantize_int4(imported.weights), _int_dequant(q, zeros, scales, g), atol=1e-5)


def test_load_quantized_checkpoint_directory(tmp_path):
    from safetensors.torch import save_file

    g = 64
    w = torch.randn(64, 128)
    q, zeros, scales = _int_quant(w, g)
    qweight, qzeros = pack_awq(q, zeros)
    save_file({"layer.qweight": qweight, "layer.qzeros": qzeros, "layer.scales": scales,
               "norm.weight": torch.ones(128)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(
        {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": g, "version": "gemm"}}))
    ckpt = load_quantized_checkpoint(tmp_path)
    assert ckpt.config.method == "awq" and set(ckpt.linears) == {"layer"} and set(ckpt.tensors) == {"norm.weight"}
    assert torch.allclose(dequantize_int4(ckpt.linears["layer"].weights), _int_dequant(q, zeros, scales, g),
                          atol=1e-5)


def test_load_quantized_checkpoint_errors_are_clear(tmp_path):
    with pytest.raises(QuantCheckpointError, match="not a directory"):
        load_quantized_checkpoint(tmp_path / "nope")
    with pytest.raises(QuantCheckpointError, match="no quantization config"):
        load_quantized_checkpoint(tmp_path)
    (tmp_path / "quantize_config.json").write_text(json.dumps({"bits": 8, "group_size": 128}))
    with pytest.raises(QuantCheckpointError, match="only 4-bit"):
        load_quantized_checkpoint(tmp_path)


# --- FP8 KV cache helpers -------------------------------------------------------------------------

def test_kv_fp8_per_token_head_scales():
    kv = torch.randn(10, 4, 64) * torch.tensor([0.01, 1.0, 10.0, 100.0])[None, :, None]
    q, scale = quantize_kv(kv)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (10, 4)
    back = dequantize_kv(q, scale, torch.float32)
    rel = (back - kv).abs().amax(-1) / kv.abs().amax(-1)
    assert bool((rel <= 2 ** -4 + 1e-6).all())


def test_awq_checkpoint_applied_to_the_engine_model_matches_its_dequantized_weights(tmp_path):
    """Pack a tiny model's linears as AWQ, import the directory, swap the layers in: the model then
    computes what a dense model holding the dequantized weights computes."""
    import copy

    from safetensors.torch import save_file

    from triage.reference_engine.layers.quant import apply_imported_checkpoint
    from triage.reference_engine.models.loader import build_model
    from triage.reference_engine.models.model_config import PRESETS

    g = 32
    model = build_model(PRESETS["tiny"], torch.float32, "cpu", "dummy", None, seed=0)
    dense = copy.deepcopy(model)
    state: dict[str, torch.Tensor] = {}
    for name, mod in model.named_modules():
        if type(mod) is nn.Linear and name != "lm_head":
            q, zeros, scales = _int_quant(mod.weight.detach(), g)
            state[f"{name}.qweight"], state[f"{name}.qzeros"] = pack_awq(q, zeros)
            state[f"{name}.scales"] = scales
            dense.get_submodule(name).weight.data = _int_dequant(q, zeros, scales, g)
    quantized_prefixes = {k[: -len(".qweight")] for k in state if k.endswith(".qweight")}
    for k, v in model.state_dict().items():
        if k.rsplit(".", 1)[0] not in quantized_prefixes:
            state[k] = v.clone()
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "quantize_config.json").write_text(json.dumps(
        {"quant_method": "awq", "bits": 4, "group_size": g, "version": "gemm"}))

    summary = apply_imported_checkpoint(model, load_quantized_checkpoint(tmp_path))
    assert summary.num_layers_converted == len(quantized_prefixes) == 7 * PRESETS["tiny"].num_hidden_layers
    assert isinstance(model.model.layers[0].mlp.down_proj, Int4Linear)
    ids = list(range(3, 40))
    assert torch.allclose(model.forward_full(ids), dense.forward_full(ids), atol=1e-3, rtol=1e-3)


def test_engine_serves_a_local_awq_checkpoint_like_its_dequantized_dense_twin(tmp_path):
    from safetensors.torch import save_file

    from triage.reference_engine import EngineConfig, SamplingParams
    from triage.reference_engine.engine.llm_engine import LLMEngine
    from triage.reference_engine.models.loader import build_model
    from triage.reference_engine.models.model_config import PRESETS

    mc = PRESETS["tiny"]
    hf_config = {"model_type": "llama", "vocab_size": mc.vocab_size, "hidden_size": mc.hidden_size,
                 "intermediate_size": mc.intermediate_size, "num_hidden_layers": mc.num_hidden_layers,
                 "num_attention_heads": mc.num_attention_heads, "num_key_value_heads": mc.num_key_value_heads,
                 "max_position_embeddings": 256, "bos_token_id": 256, "eos_token_id": 257,
                 "torch_dtype": "float32",
                 "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm"}}
    model = build_model(mc, torch.float32, "cpu", "dummy", None, seed=1)
    packed: dict[str, torch.Tensor] = {}
    dense = {name: t.clone() for name, t in model.state_dict().items()}
    for name, mod in model.named_modules():
        if type(mod) is nn.Linear and name != "lm_head":
            q, zeros, scales = _int_quant(mod.weight.detach(), 32)
            packed[f"{name}.qweight"], packed[f"{name}.qzeros"] = pack_awq(q, zeros)
            packed[f"{name}.scales"] = scales
            dense[f"{name}.weight"] = _int_dequant(q, zeros, scales, 32)   # the dense twin holds w_hat
    for k, v in dense.items():
        if k.rsplit(".", 1)[0] + ".qweight" not in packed:
            packed[k] = v
    qdir, ddir = tmp_path / "awq", tmp_path / "dense"
    for d, state in ((qdir, packed), (ddir, dense)):
        d.mkdir()
        save_file(state, str(d / "model.safetensors"))
        cfg = dict(hf_config)
        if d == ddir:
            cfg.pop("quantization_config")
        (d / "config.json").write_text(json.dumps(cfg))
    kw = dict(max_model_len=128, num_kv_blocks=32, dtype="float32")
    q_engine, summary = load_quantized_engine(str(qdir), **kw)
    d_engine = LLMEngine(EngineConfig(model=str(ddir), **kw))
    assert summary.num_layers_converted == 7 * mc.num_hidden_layers
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    got = q_engine.generate(["hello int4"], params)[0].output_token_ids
    want = d_engine.generate(["hello int4"], params)[0].output_token_ids
    assert got == want


# --- GPU paths (run where a GPU is lent) ----------------------------------------------------------

@pytest.mark.gpu
def test_fp8_scaled_mm_path_matches_dequant_path_on_hopper():
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("row-wise torch._scaled_mm needs compute capability 8.9+")
    lin = nn.Linear(256, 512, bias=True).to("cuda", torch.bfloat16)
    fast = Fp8Linear.from_linear(lin)
    slow = Fp8Linear.from_linear(lin, allow_scaled_mm=False)
    assert fast.path == "scaled_mm" and slow.path == "dequant"
    x = torch.randn(4, 7, 256, device="cuda", dtype=torch.bfloat16)
    got, want = fast(x).float(), slow(x).float()
    # the fast path also quantizes activations (per row), so it is close, not equal
    assert (got - want).abs().max() / want.abs().max() < 0.08


@pytest.mark.gpu
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_int4_cuda_packed_path_equals_reference_path(group_size):
    lin = nn.Linear(256, 128, bias=False).to("cuda", torch.bfloat16)
    fast = Int4Linear.from_linear(lin, group_size)
    ref = Int4Linear.from_linear(lin, group_size, path="reference")
    assert fast.path == "int4pack_cuda"
    x = torch.randn(5, 256, device="cuda", dtype=torch.bfloat16)
    got, want = fast(x).float(), ref(x).float()
    assert (got - want).abs().max() / want.abs().max() < 0.03


@pytest.mark.skipif(not int4pack_cpu_available(), reason="this torch lacks the CPU int4pack ops")
def test_int4_bf16_kernel_under_fp32_compute_returns_fp32_close_to_the_exact_path():
    lin = nn.Linear(256, 96, bias=False)
    exact = Int4Linear.from_linear(lin, 64)
    fast = Int4Linear.from_linear(lin, 64)
    fast.kernel_dtype = torch.bfloat16
    x = torch.randn(3, 256)
    got, want = fast(x), exact(x)
    assert got.dtype == torch.float32 and exact.kernel_dtype is None
    assert 0 < (got - want).abs().max() / want.abs().max() < 0.02      # bf16 rounding, nothing worse
    summary = quantize_model(_TwoLayer(), "int4", group_size=64, int4_kernel_dtype=torch.bfloat16)
    assert summary.num_layers_converted == 3
