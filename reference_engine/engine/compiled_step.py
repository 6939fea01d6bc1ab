"""The decode step compiled: the model's own forward traced by ``torch.compile`` once per batch bucket.

A decode step at small batch runs about ten small ops per layer besides the weight kernels (norms, RoPE, the
residual adds, SwiGLU), each a separate dispatch in eager mode. Inductor fuses them into a few C++ loops on a
CPU (or Triton kernels on a GPU), and keeps the weight kernels (layers/kernels/bf16_weights.py and
quant_weights.py register them as operators) and attention (step_attention.py) whole. On a GPU the compiled step is also captured in CUDA graphs
(``mode="reduce-overhead"``): attention is tagged ``cudagraph_unsafe`` (its metadata changes every step), so
Inductor's graph partitioning captures the pieces between two attention calls, as vLLM's piecewise CUDA graphs do.

Like vLLM, SGLang and TGI, the step is compiled for a fixed set of batch sizes, ``DECODE_BUCKETS``: a decode
batch is padded up to the next bucket, so a new batch size never recompiles. Steps with a prefill, or larger
than the largest bucket, run eager. Compiling costs start-up seconds, which the engine logs as a phase
(``Compiling the decode step``) and which Inductor's on-disk cache (``cache_dir``) makes cheaper on the next
start.
"""
from __future__ import annotations

import logging
import os
import time
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch

from triage.reference_engine.engine.step_attention import PagedStep, compiled_attend, running
from triage.reference_engine.models.llama import LlamaForCausalLM

log = logging.getLogger("triage.reference_engine")

# vLLM's capture sizes are 1, 2, 4, then multiples of 8 (its `cuda_graph_sizes` option, vllm/config.py); ours double
# from 1 and stop at the CPU kernels' row limit (MAX_KERNEL_ROWS), past which a step widens the weights instead.
DECODE_BUCKETS = (1, 2, 4, 8, 16, 32)


def buckets_for(max_num_seqs: int) -> tuple[int, ...]:
    """The decode buckets a server with ``max_num_seqs`` can fill: those below it, and one holding it (up to 32)."""
    top = min(max_num_seqs, DECODE_BUCKETS[-1])
    return tuple(sorted({b for b in DECODE_BUCKETS if b < top} | {top}))


def inductor_cache_dir(explicit: str | None) -> str:
    """Where Inductor keeps compiled code between starts: ``explicit``, else TORCHINDUCTOR_CACHE_DIR, else torch's
    default (a folder under the system temp dir, named after the user)."""
    if explicit:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = explicit
        return explicit
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return cache_dir()


# Inductor's options for the step. size_asserts: its generated code checks every input's size and stride at each
# call (about 380 checks a step for the small preset, 0.36 ms of a 6 ms INT4 step at batch size 1 on the 2-core
# Xeon); Dynamo's guards already hold each input, parameters included, to the sizes and strides it was compiled
# for. On a GPU, "triton.cudagraphs" is what mode="reduce-overhead" sets (torch._inductor.list_mode_options);
# torch.compile takes a mode or options, not both.
INDUCTOR_OPTIONS = {"size_asserts": False}


def _decode_forward(self: CompiledDecode, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The model's one forward with the compiled step's attention: what each CompiledDecode compiles."""
    return self.model.logits(self.model.hidden_states(input_ids, positions, compiled_attend))


# The guards Dynamo checks before each call of the compiled step: the inputs (which bucket) and the global state
# (grad mode, default device, ...). Left out: about 3,000 guards on the model's modules, parameters and the
# globals its code reads, 0.3 ms of a 4.4 ms INT4 step at bs=1 on the 2-vCPU Xeon. A model is fixed for its
# engine's life, and each CompiledDecode compiles a code object of its own, so nothing they would catch can
# change under a compiled step. vLLM drops its compiled model's guards for the same reason
# (vllm/compilation/wrapper.py).
_INPUT_GUARDS = frozenset({"self", "input_ids", "positions", ""})


def _input_guards(entries: list) -> list[bool]:
    return [entry.name in _INPUT_GUARDS for entry in entries]


class CompiledDecode:
    """``run(input_ids, positions, step)`` → logits for a decode batch of at most ``max(buckets)`` tokens."""

    def __init__(self, model: LlamaForCausalLM, buckets: tuple[int, ...], device: torch.device):
        self.model, self.buckets, self.device = model, buckets, device
        # Dynamo keeps its compiled versions on the function's code object. A code object of this instance's own
        # keeps them apart from every other engine's in the process (baseline rows, tests), which is what lets
        # the guards below leave the model out.
        fn = _decode_forward
        code = fn.__code__.replace(co_name=f"decode_forward_{id(self):x}")
        forward = types.MethodType(types.FunctionType(code, fn.__globals__, None, None, fn.__closure__), self)
        options = dict(INDUCTOR_OPTIONS, guard_filter_fn=_input_guards,
                       **({"triton.cudagraphs": True} if device.type == "cuda" else {}))
        self._forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = torch.compile(
            forward, dynamic=False, fullgraph=True, options=options)

    def bucket_for(self, num_tokens: int) -> int | None:
        return next((b for b in self.buckets if b >= num_tokens), None)

    def run(self, input_ids: torch.Tensor, positions: torch.Tensor, step: PagedStep) -> torch.Tensor:
        n = input_ids.shape[0]
        bucket = self.bucket_for(n)
        if bucket is None:
            raise ValueError(f"{n} tokens is more than the largest decode bucket ({self.buckets[-1]})")
        if bucket > n:        # padding rows: token 0 at position 0; attention skips them, their logits are dropped
            input_ids = torch.nn.functional.pad(input_ids, (0, bucket - n))
            positions = torch.nn.functional.pad(positions, (0, bucket - n))
        with running(step):
            logits = self._forward(input_ids, positions)
        return logits[:n] if bucket > n else logits

    def warm_up(self, scratch_step: Callable[[int], PagedStep], buckets: tuple[int, ...]) -> None:
        """Compile ``buckets`` now (at start-up, not at a user's first request), each on a scratch step."""
        for bucket in buckets:
            tic = time.perf_counter()
            ids = torch.zeros(bucket, dtype=torch.long, device=self.device)
            self.run(ids, ids.clone(), scratch_step(bucket))
            log.debug("decode bucket %d compiled in %.3f s", bucket, time.perf_counter() - tic)


MIN_GAIN_X = 1.05       # auto keeps the compiled step only where it beats eager by this much at batch size 1
PROBE_ROUNDS = 5


@dataclass(frozen=True, slots=True)
class CompileChoice:
    """What the decode step runs and why: named in the engine's stats, the log and every baseline row."""

    mode: str                       # off | auto | on, as configured
    compiled: bool
    reason: str
    buckets: tuple[int, ...] = ()
    compile_s: float | None = None  # start-up seconds spent compiling (all buckets)
    cache_dir: str | None = None

    @property
    def step(self) -> str:
        return "compiled" if self.compiled else "eager"


def _step_s(fn: Callable[[], object], device: torch.device, repeats: int = 3) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    sync()
    tic = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync()
    return (time.perf_counter() - tic) / repeats


def _why(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def choose_compile(runner, mode: str, max_num_seqs: int, cache_dir: str | None) -> CompileChoice:
    """Compile the runner's decode step as ``mode`` says; sets ``runner.compiled`` when it is kept. ``on`` raises
    RuntimeError with the reason where compiling fails; ``auto`` falls back to eager with it."""
    if mode == "off":
        return CompileChoice(mode, False, "eager (compile=off)")
    where = inductor_cache_dir(cache_dir)
    buckets = buckets_for(max_num_seqs)
    log.info("Compiling the decode step for batch sizes %s (Inductor cache %s)", list(buckets), where)
    tic = time.perf_counter()
    compiled = CompiledDecode(runner.model, buckets, runner.device)
    try:
        with torch.inference_mode():
            compiled.warm_up(runner.scratch_step, buckets[:1])
            gain = _gain_at_one(runner, compiled) if mode == "auto" else None
            if gain is not None and gain < MIN_GAIN_X:
                why = f"the compiled step is not faster here ({gain:.2f}x eager at batch size 1)"
                log.info("Decode step runs eager: %s", why)
                return CompileChoice(mode, False, f"eager: {why}", cache_dir=where)
            compiled.warm_up(runner.scratch_step, buckets[1:])
    except Exception as exc:  # noqa: BLE001 - no C++ compiler, an op Inductor cannot trace, ...: eager stays
        if mode == "on":
            raise RuntimeError(f"compile=on, but the decode step could not be compiled ({_why(exc)})") from exc
        log.warning("Decode step runs eager: it could not be compiled (%s)", _why(exc))
        return CompileChoice(mode, False, f"eager: it could not be compiled ({_why(exc)})", cache_dir=where)
    seconds = time.perf_counter() - tic
    log.info("Compiling the decode step took %.3f seconds", seconds)
    runner.compiled = compiled
    measured = "" if gain is None else f", {gain:.2f}x eager at batch size 1"
    reason = f"compiled (torch.compile, Inductor{measured})"
    log.info("Decode step runs %s", reason)
    return CompileChoice(mode, True, reason, buckets, seconds, where)


def _gain_at_one(runner, compiled: CompiledDecode) -> float:
    """Eager seconds over compiled seconds for one decode token, alternating, each keeping its best."""
    step = runner.scratch_step(1)
    ids = torch.zeros(1, dtype=torch.long, device=runner.device)

    def eager() -> object:
        return runner.model.logits(runner.model.hidden_states(ids, ids, step))

    best = {"eager": float("inf"), "compiled": float("inf")}
    for _ in range(PROBE_ROUNDS):
        best["eager"] = min(best["eager"], _step_s(eager, runner.device))
        best["compiled"] = min(best["compiled"], _step_s(lambda: compiled.run(ids, ids, step), runner.device))
    return best["eager"] / best["compiled"]
