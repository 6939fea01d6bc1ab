"""Weights: deterministic random ("dummy", as vLLM's ``--load-format dummy``) or real safetensors
from a local directory with Hugging Face parameter names. The compute dtype is chosen in dtype_choice.py."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from triage.core.errors import EngineError
from triage.reference_engine.host.dtype_choice import DTYPE_NAMES, TORCH_DTYPES  # noqa: F401  (DTYPE_NAMES re-exported)
from triage.reference_engine.models.llama import LlamaForCausalLM, hf_state_dict, rope_inv_freq
from triage.reference_engine.models.model_config import ModelConfig

_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


# Inside ``reuse_dummy_weights()``, generated weights are kept and copied into the next model of the
# same shapes, seed and dtype instead of being drawn again (1 s for the 100M `small` preset on a CPU):
# `triage baseline` builds over a dozen engines of one model.
_dummy_cache: dict[tuple, dict[str, torch.Tensor]] | None = None


@contextmanager
def reuse_dummy_weights() -> Iterator[None]:
    global _dummy_cache
    outer = _dummy_cache
    _dummy_cache = {} if outer is None else outer
    try:
        yield
    finally:
        _dummy_cache = outer


def _init_dummy_cached(model: LlamaForCausalLM, seed: int) -> None:
    params = dict(model.named_parameters())
    dtype = next(iter(params.values())).dtype
    key = (repr(model.config), seed, str(dtype))
    if _dummy_cache is None:
        init_dummy_weights(model, seed)
        return
    cached = _dummy_cache.get(key)
    if cached is None:
        init_dummy_weights(model, seed)
        _dummy_cache.clear()                       # one model's weights at a time
        _dummy_cache[key] = {name: p.detach().to("cpu", copy=True) for name, p in params.items()}
        return
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(cached[name])


def init_dummy_weights(model: LlamaForCausalLM, seed: int) -> None:
    """Deterministic random weights: N(0, 1/fan_in) for matrices (unit-variance outputs, so even a tiny
    model produces varied tokens), N(0, 1) for embeddings, ones for norms, zeros for biases. Generated
    in float32 on CPU so every device and dtype starts from the same numbers, then rounded to the dtype the
    model declares: a bf16 model computed in fp32 holds the same (exactly upcast) values as in bf16."""
    storage = TORCH_DTYPES.get(model.config.torch_dtype or "float32", torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                values = torch.ones(param.shape)
            elif name.endswith(".bias"):
                values = torch.zeros(param.shape)
            elif name.endswith("embed_tokens.weight"):
                values = torch.randn(param.shape, generator=gen)
            else:
                values = torch.randn(param.shape, generator=gen) * param.shape[-1] ** -0.5
            param.copy_(values.to(storage).to(param.dtype))


def safetensors_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, KeyError, json.JSONDecodeError) as exc:
            raise EngineError(f"cannot read {index}: {exc}") from exc
        return sorted({directory / name for name in weight_map.values()})
    return sorted(directory.glob("*.safetensors"))


def load_safetensors_weights(model: LlamaForCausalLM, directory: Path) -> None:
    from safetensors.torch import load_file

    files = safetensors_files(directory)
    if not files:
        raise EngineError(f"no *.safetensors files in {directory}; use --load-format dummy for random weights")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            state.update(load_file(str(path)))
        except Exception as exc:  # safetensors raises its own error types
            raise EngineError(f"cannot read weights from {path}: {exc}") from exc
    state = {k: v for k, v in state.items() if not k.endswith(_IGNORED_SUFFIXES)}
    expected = hf_state_dict(model)                 # views into our (partly fused) parameters
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise EngineError(f"checkpoint in {directory} does not match the Llama-family layout: "
                          f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                          f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
    with torch.no_grad():
        for name, target in expected.items():
            tensor = state[name]
            if tuple(tensor.shape) != tuple(target.shape):
                raise EngineError(f"{name}: checkpoint shape {tuple(tensor.shape)} != config shape {tuple(target.shape)}")
            target.copy_(tensor.to(target.dtype))


def build_model(cfg: ModelConfig, dtype: torch.dtype, device: str, load_format: str,
                directory: Path | None, seed: int) -> LlamaForCausalLM:
    if load_format == "auto":
        load_format = "safetensors" if directory is not None and safetensors_files(directory) else "dummy"
    if load_format == "safetensors" and directory is None:
        raise EngineError("load_format=safetensors needs a local model directory, not a preset name")
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    model = model.to_empty(device=device).to(dtype)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb.inv_freq = rope_inv_freq(cfg).to(device)
    if load_format == "dummy":
        _init_dummy_cached(model, seed)
    else:
        load_safetensors_weights(model, directory)
    model.load_format = load_format
    return model.eval()
