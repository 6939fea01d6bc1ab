"""Benchmark 4: generated tokens/s, reference engine vs Hugging Face ``generate()`` on the same weights.

Targets: >= 1.2x at batch size 1, >= 2x on 16 mixed-length requests. The ``small`` preset with
dummy weights is built in our engine, its compute dtype chosen as the engine chooses it (a timed matmul
per dtype the weights allow: float32 on a CPU without bf16 units); the same tensors are loaded into
``transformers``' ``LlamaForCausalLM`` (parameter names are identical) in that same dtype. HF runs the 16
requests the way ``generate()`` batches: left-padded prompts and every row decoding until the longest
request's ``max_new_tokens`` (shorter requests' extra tokens are discarded and not counted as useful).
Greedy outputs are compared token for token, so the speed comparison is between equal work.

The box this runs on may be shared: each side runs ``--repeats`` times, alternating, and the best
(shortest) run of each side is compared; every run's time is kept in the JSON.
"""
from __future__ import annotations

import random
import time

from engine_common import host_info, parser, write_result

NAME = "engine_vs_hf"


def build(args):
    import torch
    import transformers

    from triage.reference_engine import EngineConfig, LLMEngine

    torch.set_num_threads(args.threads)
    engine = LLMEngine(EngineConfig(model=args.model, max_model_len=1024, num_kv_blocks=2048, seed=args.seed,
                                    max_num_seqs=16, max_num_batched_tokens=2048, dtype=args.dtype))
    mc = engine.model_config
    hf_cfg = transformers.LlamaConfig(
        vocab_size=mc.vocab_size, hidden_size=mc.hidden_size, intermediate_size=mc.intermediate_size,
        num_hidden_layers=mc.num_hidden_layers, num_attention_heads=mc.num_attention_heads,
        num_key_value_heads=mc.num_key_value_heads, head_dim=mc.head_dim,
        max_position_embeddings=mc.max_position_embeddings, rms_norm_eps=mc.rms_norm_eps, rope_theta=mc.rope_theta,
        tie_word_embeddings=mc.tie_word_embeddings, bos_token_id=mc.bos_token_id, eos_token_id=mc.eos_token_id,
        pad_token_id=0)
    hf = transformers.LlamaForCausalLM(hf_cfg).to(engine.dtype).eval()
    from triage.reference_engine.models.llama import hf_state_dict

    missing, unexpected = hf.load_state_dict(hf_state_dict(engine.runner.model), strict=False)
    tied = {"lm_head.weight"} if mc.tie_word_embeddings else set()
    if [m for m in missing if "rotary" not in m and m not in tied] or unexpected:
        raise SystemExit(f"weights do not line up: missing={missing} unexpected={unexpected}")
    return engine, hf


def hf_generate(hf, prompts: list[list[int]], max_new: int) -> tuple[list[list[int]], float]:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, min_new_tokens=max_new,
                          do_sample=False, pad_token_id=0, eos_token_id=None)
    return out[:, width:].tolist(), time.perf_counter() - t0


def ours_generate(engine, prompts, max_tokens: list[int]) -> tuple[list[list[int]], float]:
    from triage.reference_engine import SamplingParams

    params = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True) for n in max_tokens]
    t0 = time.perf_counter()
    outs = engine.generate(prompts, params)
    return [c.output_token_ids for c in outs], time.perf_counter() - t0


def alternate(repeats: int, hf_run, ours_run) -> tuple[tuple[list, float, list[float]], ...]:
    """HF, ours, HF, ours...: for each side its output (greedy: the same every run), best and all times."""
    runs: dict[str, tuple[list, list[float]]] = {"hf": ([], []), "ours": ([], [])}
    for _ in range(repeats):
        for side, run in (("hf", hf_run), ("ours", ours_run)):
            out, seconds = run()
            runs[side] = (out, runs[side][1] + [seconds])
    return tuple((out, min(times), times) for out, times in runs.values())


def main() -> None:
    p = parser(NAME, __doc__)
    p.add_argument("--model", default="small")
    p.add_argument("--bs1-prompt-tokens", type=int, default=64)
    p.add_argument("--bs1-new-tokens", type=int, default=48)
    p.add_argument("--num-mixed", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="auto", help="engine dtype (auto: measured); HF runs in the same one")
    p.add_argument("--repeats", type=int, default=3, help="runs per side, alternating; the best counts")
    args = p.parse_args()
    started = time.perf_counter()
    host = host_info(args.threads)
    engine, hf = build(args)
    rng = random.Random(args.seed)
    vocab = min(engine.model_config.vocab_size, 32000)

    # Warm-up both paths once (allocator, kernels).
    ours_generate(engine, [[1, 2, 3, 4]], [2])
    hf_generate(hf, [[1, 2, 3, 4]], 2)

    prompt = [rng.randrange(vocab) for _ in range(args.bs1_prompt_tokens)]
    (hf_bs1, hf_bs1_s, hf_bs1_runs), (our_bs1, our_bs1_s, our_bs1_runs) = alternate(
        args.repeats, lambda: hf_generate(hf, [prompt], args.bs1_new_tokens),
        lambda: ours_generate(engine, [prompt], [args.bs1_new_tokens]))
    bs1 = {"new_tokens": args.bs1_new_tokens, "hf_s": hf_bs1_s, "ours_s": our_bs1_s,
           "hf_runs_s": hf_bs1_runs, "ours_runs_s": our_bs1_runs,
           "hf_tok_per_s": args.bs1_new_tokens / hf_bs1_s, "ours_tok_per_s": args.bs1_new_tokens / our_bs1_s,
           "greedy_tokens_identical": hf_bs1[0] == our_bs1[0]}

    prompts = [[rng.randrange(vocab) for _ in range(rng.randint(16, 256))] for _ in range(args.num_mixed)]
    max_tokens = [rng.randint(8, 96) for _ in range(args.num_mixed)]
    (hf_out, hf_s, hf_runs), (our_out, our_s, our_runs) = alternate(
        args.repeats, lambda: hf_generate(hf, prompts, max(max_tokens)), lambda: ours_generate(engine, prompts, max_tokens))
    useful = sum(max_tokens)
    matches = sum(h[:n] == o for h, o, n in zip(hf_out, our_out, max_tokens, strict=True))
    mixed = {"num_requests": args.num_mixed, "useful_tokens": useful, "hf_computed_tokens": max(max_tokens) * args.num_mixed,
             "hf_s": hf_s, "ours_s": our_s, "hf_runs_s": hf_runs, "ours_runs_s": our_runs, "hf_tok_per_s": useful / hf_s, "ours_tok_per_s": useful / our_s,
             "num_requests_with_identical_greedy_tokens": matches}
    s1, s16 = bs1["ours_tok_per_s"] / bs1["hf_tok_per_s"], mixed["ours_tok_per_s"] / mixed["hf_tok_per_s"]
    write_result(args.out, NAME, {
        "host": host, "config": vars(args) | {"out": str(args.out)}, "bs1": bs1, "mixed": mixed,
        "dtype": str(engine.dtype).removeprefix("torch."), "dtype_note": engine.dtype_note,
        "summary": {"bs1_speedup_x": round(s1, 2), "bs1_target_x": 1.2, "mixed_speedup_x": round(s16, 2),
                    "mixed_target_x": 2.0, "meets_targets": s1 >= 1.2 and s16 >= 2.0,
                    "bs1_greedy_identical": bs1["greedy_tokens_identical"],
                    "mixed_identical": f"{matches}/{args.num_mixed}"},
    }, started)


if __name__ == "__main__":
    main()
