"""Quantization quality: logits of a quantized model against the unquantized one on the same prompts."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, slots=True)
class LogitError:
    max_abs: float
    mean_abs: float
    top1_agreement_frac: float
    num_prompts: int
    num_positions: int
    reference_logit_std: float      # the scale the errors should be read against


def compare_logits(reference: list[torch.Tensor], candidate: list[torch.Tensor]) -> LogitError:
    if len(reference) != len(candidate) or not reference:
        raise ValueError("need the same, non-zero number of reference and candidate logit tensors")
    ref = torch.cat(reference)
    cand = torch.cat(candidate)
    diff = (cand - ref).abs()
    agree = (cand.argmax(-1) == ref.argmax(-1)).float().mean()
    return LogitError(max_abs=float(diff.max()), mean_abs=float(diff.mean()),
                      top1_agreement_frac=float(agree), num_prompts=len(reference),
                      num_positions=int(ref.shape[0]), reference_logit_std=float(ref.std()))


@torch.inference_mode()
def engine_prefill_logits(engine, token_ids: list[int]) -> torch.Tensor:
    """[T, vocab] logits of a whole prompt computed through the engine's paged KV cache (K/V are
    written to the cache and read back by the attention backend). Needs prefix caching off and a
    token budget that prefills the prompt in one step."""
    from triage.reference_engine import SamplingParams

    model = engine.runner.model
    captured: list[torch.Tensor] = []
    handle = model.model.norm.register_forward_hook(lambda _m, _i, out: captured.append(out.detach()))
    try:
        engine.generate([token_ids], SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True))
    finally:
        handle.remove()
    if not captured or captured[0].shape[0] != len(token_ids):
        raise RuntimeError("the prompt was not prefilled in one step; raise max_num_batched_tokens")
    return model.logits(captured[0]).float()
