"""Decode attention, one C++ call a layer (kernels/decode_attention.cpp) against the torch ops it replaces.

One layer's attention for a decode batch with the `small` preset's head geometry (12 query heads, 4 K/V heads
of 64), a cache of 16-token blocks, at several context lengths, with an fp32 query and cache (an fp32 engine) and
with a bf16 query and cache (a bf16 engine; the kernel widens the query and narrows its output, as the backend
does): the kernel against the SDPA backend's
torch path (``single_decode`` at bs=1, the grouped SDPA calls at bs>1). Blocks are consecutive (what a fresh
pool hands out; the torch path then reads a view, its best case) or scattered (it gathers a copy). Each case
alternates the two over --rounds and keeps each side's best; the ratio is torch / kernel (> 1: the kernel is
faster). It sets ONE_SEQUENCE_MAX_CONTEXT, the longest context the kernel takes for a lone fp32 sequence.
``write_and_attend`` times the call that also writes the layer's new K/V rows against the two index_copy_ calls
and the kernel call it replaces (ratio separate / fused).

    python benchmarks/decode_attention.py [--threads N] [--rounds 7]
"""
from __future__ import annotations

import random
import time

from engine_common import host_info, parser, write_result

NAME = "decode_attention"
HEADS, KV_HEADS, HEAD_DIM, BLOCK = 12, 4, 64, 16
CONTEXTS = (64, 256, 512, 1024, 1536, 2048, 4096)


def _best_seconds(sides: dict, rounds: int, repeats: int) -> dict[str, float]:
    """Each side's best seconds a call over ``rounds``, the sides alternating within a round."""
    best = {name: float("inf") for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            tic = time.perf_counter()
            for _ in range(repeats):
                fn()
            best[name] = min(best[name], (time.perf_counter() - tic) / repeats)
    return best


def _case(batch: int, context: int, scattered: bool, rounds: int, dtype_name: str) -> dict:
    import torch

    from triage.reference_engine.layers.attention import sdpa
    from triage.reference_engine.layers.attention.base import AttentionMetadata
    from triage.reference_engine.layers.kernels.decode_attention import kernel

    per_seq = -(-context // BLOCK)
    num_blocks = batch * per_seq
    ids = list(range(num_blocks))
    if scattered:
        random.Random(0).shuffle(ids)
    tables = [ids[i * per_seq:(i + 1) * per_seq] for i in range(batch)]
    dtype = getattr(torch, dtype_name)
    k = torch.randn(num_blocks, BLOCK, KV_HEADS, HEAD_DIM).to(dtype)
    v = torch.randn(num_blocks, BLOCK, KV_HEADS, HEAD_DIM).to(dtype)
    q = torch.randn(batch, HEADS, HEAD_DIM).to(dtype)

    def meta() -> AttentionMetadata:     # fresh each call: the torch path caches its groups on the metadata
        return AttentionMetadata(q_starts=list(range(batch)), q_lens=[1] * batch, kv_lens=[context] * batch,
                                 block_tables=tables, block_size=BLOCK)

    def torch_path():
        m = meta()
        if batch == 1:
            return sdpa.single_decode(q, k, v, m, 0.125)
        return sdpa.SdpaAttention()._batched_decode(q, k, v, m, 0.125)

    def kernel_path():      # the kernel itself, past ONE_SEQUENCE_MAX_CONTEXT too
        m = meta()
        return kernel()[0].decode_attention(q, k, v, m.table_tensor(q.device), m.kv_lens, 0.125)

    sides = {"kernel": kernel_path, "torch": torch_path}
    err = (sides["kernel"]().float() - sides["torch"]().float()).abs().max().item()
    best = _best_seconds(sides, rounds, repeats=max(3, int(20_000 / context)))
    return {"dtype": dtype_name, "batch": batch, "context": context,
            "blocks": "scattered" if scattered else "consecutive",
            "kernel_us": best["kernel"] * 1e6, "torch_us": best["torch"] * 1e6,
            "torch_over_kernel_x": best["torch"] / best["kernel"], "max_abs_diff": err}


WRITE_CONTEXTS = (64, 512, 2048)


def _write_case(batch: int, context: int, rounds: int, dtype_name: str) -> dict:
    """A decode layer's cache write and attention: one kernel call that writes the new rows first, against the
    two index_copy_ calls the KV format made before it and the kernel call after them. Scattered blocks."""
    import torch

    from triage.reference_engine.layers.attention.base import AttentionMetadata
    from triage.reference_engine.layers.kernels.decode_attention import kernel

    per_seq = -(-context // BLOCK)
    ids = list(range(batch * per_seq))
    random.Random(0).shuffle(ids)
    tables = [ids[i * per_seq:(i + 1) * per_seq] for i in range(batch)]
    dtype = getattr(torch, dtype_name)
    k = torch.randn(len(ids), BLOCK, KV_HEADS, HEAD_DIM).to(dtype)
    v = torch.randn(len(ids), BLOCK, KV_HEADS, HEAD_DIM).to(dtype)
    q = torch.randn(batch, HEADS, HEAD_DIM).to(dtype)
    k_new, v_new = (torch.randn(batch, KV_HEADS, HEAD_DIM).to(dtype) for _ in range(2))
    slots = torch.tensor([t[(context - 1) // BLOCK] * BLOCK + (context - 1) % BLOCK for t in tables])
    meta = AttentionMetadata(q_starts=list(range(batch)), q_lens=[1] * batch, kv_lens=[context] * batch,
                             block_tables=tables, block_size=BLOCK)
    module, table = kernel()[0], meta.table_tensor(q.device)

    def separate():
        for cache, new in ((k, k_new), (v, v_new)):
            cache.view(-1, KV_HEADS, HEAD_DIM).index_copy_(0, slots, new.to(cache.dtype))
        return module.decode_attention(q, k, v, table, meta.kv_lens, 0.125)

    def fused():
        return module.decode_attention(q, k, v, table, meta.kv_lens, 0.125, k_new, v_new, slots)

    sides = {"fused": fused, "separate": separate}
    same = bool(torch.equal(separate(), fused()))
    best = _best_seconds(sides, rounds, repeats=max(20, int(100_000 / context)))
    return {"dtype": dtype_name, "batch": batch, "context": context, "fused_us": best["fused"] * 1e6,
            "separate_us": best["separate"] * 1e6, "separate_over_fused_x": best["separate"] / best["fused"],
            "identical_output": same}


def main() -> None:
    ap = parser(NAME, __doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    started = time.perf_counter()
    host = host_info(args.threads)
    from triage.reference_engine.layers.kernels.decode_attention import ONE_SEQUENCE_MAX_CONTEXT, kernel

    if kernel()[0] is None:
        raise SystemExit(f"the decode-attention kernel is not built here: {kernel()[1]}")
    cases = []
    for dtype_name in ("float32", "bfloat16"):
        for batch in (1, 8):
            for scattered in (False, True):
                for context in CONTEXTS:
                    c = _case(batch, context, scattered, args.rounds, dtype_name)
                    cases.append(c)
                    print(f"{dtype_name:8s} bs={batch} {c['blocks']:11s} ctx={context:5d}: kernel "
                          f"{c['kernel_us']:8.1f} us, torch {c['torch_us']:8.1f} us, {c['torch_over_kernel_x']:.2f}x",
                          flush=True)
    summary = {f"{c['dtype']}_bs{c['batch']}_{c['blocks']}_ctx{c['context']}": round(c["torch_over_kernel_x"], 2)
               for c in cases}
    write_cases = []
    for dtype_name in ("float32", "bfloat16"):
        for batch in (1, 8):
            for context in WRITE_CONTEXTS:
                c = _write_case(batch, context, args.rounds, dtype_name)
                write_cases.append(c)
                print(f"write+attend {dtype_name:8s} bs={batch} ctx={context:5d}: one call {c['fused_us']:7.1f} us, "
                      f"index_copy_ x2 + call {c['separate_us']:7.1f} us, {c['separate_over_fused_x']:.2f}x", flush=True)
    write_result(args.out, NAME, {"host": host, "path": "fp32, or bf16, query and cache (the kernel computes in "
                                                        "fp32); torch_num_threads as in host",
                                  "one_sequence_max_context": ONE_SEQUENCE_MAX_CONTEXT, "cases": cases,
                                  "summary": summary, "write_and_attend": write_cases,
                                  "write_and_attend_summary": {
                                      f"{c['dtype']}_bs{c['batch']}_ctx{c['context']}":
                                          round(c["separate_over_fused_x"], 2) for c in write_cases}}, started)


if __name__ == "__main__":
    main()
