"""The one thread that owns the engine.

LLMEngine is single-threaded, and a step can take tens of milliseconds, so it never runs on the
event loop. This thread loops: take add/abort commands from an inbound queue, step the engine,
hand each RequestOutput to the asyncio queue of the HTTP request it belongs to (through
loop.call_soon_threadsafe, one callback per step), and refresh the Prometheus series from the
engine's stats. HTTP handlers only ever talk to it through `submit` and `abort`.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from triage.core.errors import TriageError
from triage.reference_engine.layers.sampling_params import SamplingParams
from triage.reference_engine.serve.metrics_export import EngineCounters, FinishedRequest, ServerMetrics
from triage.reference_engine.serve.server_protocol import ApiError

log = logging.getLogger("triage.serve")

IDLE_WAIT_S = 0.05          # how long the idle loop sleeps on the command queue
IDLE_SPIN_WAIT_S = 0.002    # after a step that scheduled nothing
STATS_REFRESH_S = 0.025     # while busy, gauges and counters follow the engine this often (idle: each loop)
STATS_LOG_INTERVAL_S = 10.0  # the vLLM-style "Avg prompt throughput ..." line, when there was work


@dataclass(frozen=True, slots=True)
class EngineFailure:
    """Put into every open request's queue when the engine thread died."""

    message: str


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """What an HTTP handler asks for; the engine thread turns it into SamplingParams."""

    max_tokens: int | None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0


@dataclass(slots=True)
class _Add:
    request_id: str
    prompt: str | list[int]
    sampling: SamplingRequest
    arrival_s: float
    loop: asyncio.AbstractEventLoop
    outputs: asyncio.Queue
    accepted: asyncio.Future


@dataclass(slots=True)
class _Abort:
    request_id: str


@dataclass(slots=True)
class _Route:
    loop: asyncio.AbstractEventLoop
    outputs: asyncio.Queue
    arrival_s: float
    max_tokens: int
    last_token_s: float | None = None


@dataclass(slots=True)
class _LogWindow:
    start_s: float = field(default_factory=time.monotonic)
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0


def encode_prompt(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` with the engine's tokenizer (a list, or an object with `.ids`)."""
    encoded = tokenizer.encode(text)
    return list(getattr(encoded, "ids", encoded))


class EngineWorker:
    """Runs an LLMEngine on a background thread and routes its outputs to asyncio queues."""

    def __init__(self, engine: Any, metrics: ServerMetrics | None = None) -> None:
        self._engine = engine
        self._metrics = metrics
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._routes: dict[str, _Route] = {}      # touched by the engine thread only
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="triage-engine", daemon=True)
        self._failure: str | None = None
        self._vocab_size = _vocab_size(engine)
        capacity = getattr(engine, "kv_cache_tokens_capacity", None)
        self._kv_capacity_tokens = int(capacity) if isinstance(capacity, int) and capacity > 0 else None
        self.max_model_len = int(engine.max_model_len)
        self._window = _LogWindow()
        self._last_counters = EngineCounters()
        self._stats_at_s = 0.0

    # Called from the event loop --------------------------------------------------------------------

    @property
    def failure(self) -> str | None:
        """Why the engine thread stopped, or None while it is healthy."""
        return self._failure

    @property
    def alive(self) -> bool:
        return self._failure is None and self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        self._commands.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    async def submit(self, request_id: str, prompt: str | list[int], sampling: SamplingRequest,
                     arrival_s: float) -> tuple[asyncio.Queue, int]:
        """Queue a request; returns (its output queue, number of prompt tokens) once the engine has
        accepted it, or raises ApiError (400 for a request the engine refuses, 503 if it is down)."""
        loop = asyncio.get_running_loop()
        outputs: asyncio.Queue = asyncio.Queue()
        accepted = loop.create_future()
        with self._lock:
            if not self.alive:
                raise ApiError(503, f"the engine is not running: {self._failure or 'stopped'}",
                               err_type="service_unavailable")
            self._commands.put(_Add(request_id, prompt, sampling, arrival_s, loop, outputs, accepted))
        try:
            num_prompt_tokens = await accepted
        except asyncio.CancelledError:
            self.abort(request_id)
            raise
        return outputs, num_prompt_tokens

    def abort(self, request_id: str) -> None:
        """Ask the engine to drop a request and free its KV blocks. Safe to call more than once."""
        self._commands.put(_Abort(request_id))

    # The engine thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        engine = self._engine
        try:
            while not self._stopping.is_set():
                busy = engine.has_unfinished()
                self._drain(block=not busy)
                if self._stopping.is_set():
                    break
                if engine.has_unfinished():
                    outputs = engine.step()
                    self._route(outputs)
                    step = getattr(engine, "last_step", None)
                    if step is not None and self._metrics is not None:
                        self._metrics.observe_iteration(int(step.num_tokens))
                    if not outputs and (step is None or step.num_tokens == 0):
                        # Nothing could be scheduled: wait for a command instead of spinning.
                        self._drain(block=True, wait_s=IDLE_SPIN_WAIT_S)
                now_s = time.monotonic()
                if now_s - self._stats_at_s >= STATS_REFRESH_S or not engine.has_unfinished():
                    self._stats_at_s = now_s
                    self._refresh_stats()
        except Exception as e:  # the engine is broken: fail everyone loudly, keep the server up
            log.exception("engine loop failed; the server will answer 503 from now on")
            self._die(f"{type(e).__name__}: {e}")
            return
        self._die("the server is shutting down")

    def _drain(self, block: bool, wait_s: float = IDLE_WAIT_S) -> None:
        try:
            cmd = self._commands.get(timeout=wait_s) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            if isinstance(cmd, _Add):
                self._add(cmd)
            elif isinstance(cmd, _Abort):
                self._abort(cmd.request_id)
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                return

    def _add(self, cmd: _Add) -> None:
        engine = self._engine
        try:
            ids = cmd.prompt if isinstance(cmd.prompt, list) else encode_prompt(engine.tokenizer, cmd.prompt)
            max_tokens = self._check_lengths(ids, cmd.sampling)
            s = cmd.sampling
            params = SamplingParams(max_tokens=max_tokens, temperature=s.temperature, top_p=s.top_p,
                                    seed=s.seed, stop=s.stop, ignore_eos=s.ignore_eos,
                                    min_tokens=s.min_tokens)
            engine.add_request(cmd.request_id, ids, params, arrival_time=cmd.arrival_s)
        except ApiError as e:
            _resolve(cmd.loop, cmd.accepted, error=e)
            return
        except (ValueError, TypeError, TriageError) as e:  # the engine refused this request
            _resolve(cmd.loop, cmd.accepted, error=ApiError(400, str(e)))
            return
        except Exception as e:
            log.exception("adding request %s failed", cmd.request_id)
            _resolve(cmd.loop, cmd.accepted,
                     error=ApiError(500, f"the engine could not add the request: {type(e).__name__}: {e}",
                                    err_type="internal_server_error"))
            return
        self._routes[cmd.request_id] = _Route(cmd.loop, cmd.outputs, cmd.arrival_s, max_tokens)
        _resolve(cmd.loop, cmd.accepted, value=len(ids))

    def _check_lengths(self, ids: list[int], sampling: SamplingRequest) -> int:
        """The request's max_tokens, after the same length checks vLLM makes (400 when they fail)."""
        num_prompt = len(ids)
        limit = self.max_model_len
        if self._vocab_size is not None and any(not 0 <= t < self._vocab_size for t in ids):
            raise ApiError(400, f"prompt token ids must be in [0, {self._vocab_size})", param="prompt")
        if num_prompt >= limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens, and the prompt "
                                f"is {num_prompt} tokens, which leaves no room for output. Shorten the "
                                f"prompt.", param="prompt")
        if sampling.max_tokens is not None:
            max_tokens = sampling.max_tokens
        else:  # fill the context, but never ask for more than the whole KV cache could hold
            max_tokens = limit - num_prompt
            if self._kv_capacity_tokens is not None and num_prompt < self._kv_capacity_tokens:
                max_tokens = min(max_tokens, self._kv_capacity_tokens - num_prompt)
        if num_prompt + max_tokens > limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, you "
                                f"requested {num_prompt + max_tokens} tokens ({num_prompt} in the prompt, "
                                f"{max_tokens} in the completion). Reduce the prompt or max_tokens.",
                           param="max_tokens")
        if sampling.min_tokens > max_tokens:
            raise ApiError(400, f"min_tokens ({sampling.min_tokens}) must not exceed max_tokens "
                                f"({max_tokens})", param="min_tokens")
        return max_tokens

    def _abort(self, request_id: str) -> None:
        route = self._routes.pop(request_id, None)
        if route is None:
            return  # already finished, or never accepted
        self._engine.abort(request_id)

    def _route(self, outputs: list[Any]) -> None:
        now = time.monotonic()
        metrics = self._metrics
        batches: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Queue, Any]]] = {}
        for out in outputs:
            route = self._routes.get(out.request_id)
            if route is None:
                continue  # aborted by its client after this step began
            num_new = len(out.new_token_ids)
            if num_new and metrics is not None:
                if route.last_token_s is None:
                    first_s = out.times.first_token_s if out.times.first_token_s is not None else now
                    metrics.observe_first_token(first_s - route.arrival_s)
                else:
                    metrics.observe_inter_token(now - route.last_token_s, num_new)
            if num_new:
                route.last_token_s = now
            if out.finished:
                del self._routes[out.request_id]
                if metrics is not None:
                    metrics.observe_finished(_finished(out, route, now))
            batches.setdefault(route.loop, []).append((route.outputs, out))
        for loop, items in batches.items():
            _deliver(loop, items)

    def _refresh_stats(self) -> None:
        stats = self._engine.stats()
        counters = EngineCounters(
            num_preemptions=int(stats.num_preemptions_total),
            prefix_cache_queries=int(stats.prefix_cache_queries_total),
            prefix_cache_hits=int(stats.prefix_cache_hits_total),
            prompt_tokens=int(stats.prompt_tokens_total),
            generation_tokens=int(stats.generation_tokens_total),
        )
        if self._metrics is not None:
            self._metrics.set_scheduler_state(int(stats.num_requests_running),
                                              int(stats.num_requests_waiting),
                                              float(stats.kv_cache_usage_frac))
            self._metrics.advance_counters(counters)
        self._log_stats(stats, counters)

    def _log_stats(self, stats: Any, counters: EngineCounters) -> None:
        last, window = self._last_counters, self._window
        window.prompt_tokens += counters.prompt_tokens - last.prompt_tokens
        window.generation_tokens += counters.generation_tokens - last.generation_tokens
        window.prefix_queries += counters.prefix_cache_queries - last.prefix_cache_queries
        window.prefix_hits += counters.prefix_cache_hits - last.prefix_cache_hits
        self._last_counters = counters
        elapsed_s = time.monotonic() - window.start_s
        if elapsed_s < STATS_LOG_INTERVAL_S:
            return
        if window.prompt_tokens or window.generation_tokens:
            hit_pct = 100.0 * window.prefix_hits / window.prefix_queries if window.prefix_queries else 0.0
            log.info("Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f "
                     "tokens/s, Running: %d reqs, Waiting: %d reqs, KV cache usage: %.1f%%, Prefix "
                     "cache hit rate: %.1f%%", window.prompt_tokens / elapsed_s,
                     window.generation_tokens / elapsed_s, stats.num_requests_running,
                     stats.num_requests_waiting, 100.0 * stats.kv_cache_usage_frac, hit_pct)
        self._window = _LogWindow()

    def _die(self, reason: str) -> None:
        with self._lock:
            self._failure = reason
        failure = EngineFailure(reason)
        for rid, route in list(self._routes.items()):
            _deliver(route.loop, [(route.outputs, failure)])
            del self._routes[rid]
        while True:
            try:
                cmd = self._commands.get_nowait()
            except queue.Empty:
                break
            if isinstance(cmd, _Add):
                _resolve(cmd.loop, cmd.accepted,
                         error=ApiError(503, f"the engine is not running: {reason}",
                                        err_type="service_unavailable"))


def _finished(out: Any, route: _Route, now: float) -> FinishedRequest:
    times = out.times
    arrival = times.arrival_s if times.arrival_s is not None else route.arrival_s
    finished = times.finished_s if times.finished_s is not None else now
    scheduled = times.scheduled_s if times.scheduled_s is not None else arrival
    first = times.first_token_s if times.first_token_s is not None else finished
    reason = out.finish_reason if out.finish_reason in ("stop", "length", "abort") else "stop"
    return FinishedRequest(finish_reason=reason, e2e_s=finished - arrival, queue_s=scheduled - arrival,
                           prefill_s=first - scheduled, decode_s=finished - first,
                           num_prompt_tokens=int(out.num_prompt_tokens),
                           num_output_tokens=int(out.num_output_tokens), max_tokens=route.max_tokens)


def _vocab_size(engine: Any) -> int | None:
    cfg = getattr(engine, "model_config", None)
    size = getattr(cfg, "vocab_size", None)
    return int(size) if isinstance(size, int) and size > 0 else None


def _deliver(loop: asyncio.AbstractEventLoop, items: list[tuple[asyncio.Queue, Any]]) -> None:
    def put_all() -> None:
        for q, item in items:
            q.put_nowait(item)

    try:
        loop.call_soon_threadsafe(put_all)
    except RuntimeError:
        pass  # the event loop is closed: the server is shutting down and nobody is listening


def _resolve(loop: asyncio.AbstractEventLoop, fut: asyncio.Future, value: Any = None,
             error: BaseException | None = None) -> None:
    def settle() -> None:
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:
        pass
