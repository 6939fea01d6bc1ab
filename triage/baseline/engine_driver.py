"""Engine plumbing shared by the ablations: build an engine, drive it step by step with
timestamps, sample peak memory, and summarise latencies. Every number here is a measurement."""
from __future__ import annotations

import ctypes
import gc
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from triage.baseline.config import BaselineConfig
from triage.reference_engine import EngineConfig, SamplingParams
from triage.reference_engine.engine.llm_engine import LLMEngine


def make_engine(cfg: BaselineConfig, **overrides) -> LLMEngine:
    """An engine for ``cfg.model`` on ``cfg.device``; ``overrides`` are EngineConfig fields."""
    fields = dict(model=cfg.model, dtype=cfg.dtype, device=cfg.device, seed=cfg.seed, load_format="auto")
    fields.update(overrides)
    return LLMEngine(EngineConfig(**fields))


def fit_tokens(requested: int, max_positions: int, reserve: int, what: str, minimum: int = 1) -> int:
    """``requested`` tokens, shortened to leave ``reserve`` positions free; ValueError when fewer
    than ``minimum`` remain (the row then fails with this message, and the others run)."""
    n = min(requested, max_positions - reserve)
    if n < minimum:
        raise ValueError(f"the model's max_position_embeddings ({max_positions}) leaves no room for {what} "
                         f"(needs at least {minimum + reserve} positions)")
    return n


def greedy(max_tokens: int) -> SamplingParams:
    """Greedy, exactly ``max_tokens`` tokens (EOS ignored), so every run does the same work."""
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)


def synthetic_prompt(num_tokens: int, vocab_size: int, seed: int) -> list[int]:
    """Deterministic token ids in [4, vocab): real text is not needed to time a forward pass."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab_size, (num_tokens,), generator=gen).tolist()


@dataclass(slots=True)
class RequestTrace:
    """Per-request timestamps (time.perf_counter seconds) recorded while driving ``step()``."""

    arrival_s: float
    token_times_s: list[float] = field(default_factory=list)
    finished: bool = False
    arrival_step: int = 0                # engine steps taken before this request arrived
    first_token_step: int | None = None  # the step (1-based) that produced its first token

    @property
    def num_steps_to_first_token(self) -> int | None:
        return None if self.first_token_step is None else self.first_token_step - self.arrival_step

    @property
    def ttft_s(self) -> float | None:
        return self.token_times_s[0] - self.arrival_s if self.token_times_s else None

    @property
    def e2e_s(self) -> float | None:
        return self.token_times_s[-1] - self.arrival_s if self.finished and self.token_times_s else None

    @property
    def tpot_s(self) -> float | None:
        n = len(self.token_times_s)
        return (self.token_times_s[-1] - self.token_times_s[0]) / (n - 1) if n > 1 else None

    @property
    def itls_s(self) -> list[float]:
        t = self.token_times_s
        return [b - a for a, b in zip(t, t[1:], strict=False)]


class Driver:
    """Adds requests and steps the engine, stamping every token with the wall clock."""

    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self.traces: dict[str, RequestTrace] = {}
        self.max_running = 0
        self.num_steps = 0

    def add(self, request_id: str, prompt: list[int], params: SamplingParams) -> None:
        self.traces[request_id] = RequestTrace(arrival_s=time.perf_counter(), arrival_step=self.num_steps)
        self.engine.add_request(request_id, prompt, params)

    def step(self) -> None:
        outputs = self.engine.step()
        now = time.perf_counter()
        self.num_steps += 1
        last = self.engine.last_step
        if last is not None:
            self.max_running = max(self.max_running, last.num_seqs)
        for out in outputs:
            trace = self.traces.get(out.request_id)
            if trace is None:
                continue
            if trace.first_token_step is None and out.new_token_ids:
                trace.first_token_step = self.num_steps
            trace.token_times_s.extend([now] * len(out.new_token_ids))
            trace.finished = trace.finished or out.finished

    def run_until_done(self, max_steps: int = 1_000_000) -> None:
        while self.engine.has_unfinished():
            if self.num_steps >= max_steps:
                raise RuntimeError(f"the engine did not finish within {max_steps} steps")
            self.step()


def steady_decode_tok_s(engine: LLMEngine, batch: int, steps: int, vocab_size: int, prompt_tokens: int,
                        warm_steps: int, seed: int = 0) -> float:
    """Decode tokens/s with ``batch`` sequences, over ``steps`` steps taken after every sequence has its first token
    and ``warm_steps`` more (the first steps of a batch size are not timed)."""
    drv = Driver(engine)
    for i in range(batch):
        drv.add(f"s{i}", synthetic_prompt(prompt_tokens, vocab_size, seed=seed + i), greedy(steps + warm_steps + 1))
    while any(not t.token_times_s for t in drv.traces.values()):
        drv.step()
    for _ in range(warm_steps):
        drv.step()
    tic = time.perf_counter()
    for _ in range(steps):
        drv.step()
    elapsed = time.perf_counter() - tic
    drv.run_until_done()
    return batch * steps / elapsed


def blocks(tokens: int, block_size: int = 16) -> int:
    """KV blocks that hold ``tokens`` tokens."""
    return math.ceil(tokens / block_size)


def warm(engine: LLMEngine, vocab_size: int) -> None:
    """One short request first: kernel selection and allocator warm-up stay out of the timings."""
    engine.generate([synthetic_prompt(8, vocab_size, seed=999)], greedy(2))


def percentile(values: list[float], pct: float) -> float | None:
    """Linear-interpolated percentile; None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * pct / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def release_free_heap() -> bool:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``), so that RSS tracks live memory
    and a later peak shows real growth instead of reused free pages. False where unavailable."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        return False
    return True


def _rss_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.Process(os.getpid()).memory_info().rss)
    except Exception:  # psutil missing or a sandbox hiding /proc
        return None


@dataclass(slots=True)
class PeakMemory:
    """Peak memory above the starting point while the block ran; ``method`` says what was sampled."""

    peak_extra_bytes: int | None = None
    method: str = ""


@contextmanager
def peak_memory(device: str, interval_s: float = 0.002) -> Iterator[PeakMemory]:
    """CUDA: torch's allocator peak. CPU: process RSS sampled every ``interval_s`` in a thread."""
    result = PeakMemory()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        yield result
        torch.cuda.synchronize()
        result.peak_extra_bytes = torch.cuda.max_memory_allocated() - start
        result.method = "torch.cuda.max_memory_allocated above the start"
        return
    trimmed = release_free_heap()
    start = _rss_bytes()
    if start is None:
        yield result
        result.method = "unavailable: psutil cannot read this process's RSS"
        return
    peak = [start]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss = _rss_bytes()
            if rss is not None and rss > peak[0]:
                peak[0] = rss
            stop.wait(interval_s)

    thread = threading.Thread(target=sample, name="triage-rss-sampler", daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()
        result.peak_extra_bytes = max(0, peak[0] - start)
        result.method = (f"process RSS sampled every {interval_s * 1e3:.0f} ms, above the start"
                         + (" (free heap returned to the OS first with malloc_trim)" if trimmed else ""))
