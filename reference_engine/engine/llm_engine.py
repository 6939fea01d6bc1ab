"""LLMEngine: add_request / step / generate / abort over the scheduler, allocator and model runner.

One ``step()`` is one scheduler iteration: schedule, copy-on-write copies, one forward pass over the
ragged batch, sampling, incremental detokenization and stop checks. It returns a RequestOutput for
every request that made progress.
"""
from __future__ import annotations

import itertools
import json
import logging
import time
from pathlib import Path

import torch

from triage.core.errors import EngineError
from triage.reference_engine.engine.block_manager import BlockManager, ContiguousAllocator
from triage.reference_engine.engine.compiled_step import choose_compile
from triage.reference_engine.engine.engine_config import EngineConfig
from triage.reference_engine.engine.model_runner import ModelRunner
from triage.reference_engine.engine.request_outputs import Completion, EngineStats, RequestOutput, StepStats
from triage.reference_engine.engine.scheduler import make_scheduler
from triage.reference_engine.engine.sequence import RequestTimes, Sequence
from triage.reference_engine.host.dtype_choice import DTYPE_NAMES, TORCH_DTYPES, choose_dtype
from triage.reference_engine.layers.attention import get_backend
from triage.reference_engine.layers.kv_cache import make_kv_format
from triage.reference_engine.layers.sampling_params import SamplingParams
from triage.reference_engine.models.detokenizer import IncrementalDetokenizer
from triage.reference_engine.models.loader import build_model, safetensors_files
from triage.reference_engine.models.model_config import ModelConfig, load_model_config, model_dir
from triage.reference_engine.models.tokenizer import load_tokenizer

log = logging.getLogger("triage.reference_engine")

# Without an explicit budget on CPU, KV gets room for max_num_seqs full-length sequences, capped here.
DEFAULT_CPU_KV_BUDGET_BYTES = 1 << 30
DEFAULT_CPU_KV_BUDGET_FRAC = 0.25


def _available_memory_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or the platform hides memory figures
        return None


def generation_config_eos(directory: Path | None, known: tuple[int, ...]) -> tuple[int, ...]:
    """Extra EOS ids from a local ``generation_config.json`` (instruct models list their end-of-turn
    tokens there, not in config.json)."""
    path = None if directory is None else directory / "generation_config.json"
    if path is None or not path.is_file():
        return ()
    try:
        raw = json.loads(path.read_text()).get("eos_token_id")
    except (OSError, json.JSONDecodeError, AttributeError):
        log.warning("ignoring unreadable %s", path)
        return ()
    ids = [raw] if isinstance(raw, int) else raw if isinstance(raw, list) else []
    return tuple(i for i in ids if isinstance(i, int) and i not in known)


class LLMEngine:
    def __init__(self, config: EngineConfig):
        if not isinstance(config, EngineConfig):
            raise EngineError("LLMEngine needs an EngineConfig")
        config.validate()
        self.config = config
        self.model_config: ModelConfig = load_model_config(config.model)
        mc = self.model_config
        if mc.num_attention_heads % mc.num_key_value_heads:
            raise EngineError("num_attention_heads must be a multiple of num_key_value_heads")
        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError(f"device={config.device!r} but torch sees no CUDA GPU; use --device cpu")
        max_pos = mc.max_position_embeddings
        if config.max_model_len is not None and config.max_model_len > max_pos:
            raise EngineError(f"max_model_len={config.max_model_len} exceeds the model's "
                              f"max_position_embeddings={max_pos}")
        self.max_model_len = config.max_model_len or max_pos

        get_backend(config.attention, config.device)      # fail fast on an unknown backend
        if config.num_threads is not None:
            torch.set_num_threads(config.num_threads)
        self.dtype_choice = choose_dtype(config.dtype, mc.torch_dtype, config.device)
        self.dtype, self.dtype_note = self.dtype_choice.dtype, self.dtype_choice.note
        kv_dtype = TORCH_DTYPES.get(config.kv_cache_dtype, self.dtype)   # auto, or an fp8 format's compute dtype
        kv_format = make_kv_format(config.kv_cache_dtype, kv_dtype)
        log.info("reference engine dtype: %s", self.dtype_note)
        directory = model_dir(config.model)
        self.tokenizer = load_tokenizer(directory, mc.bos_token_id,
                                        mc.eos_token_ids[0] if mc.eos_token_ids else None)
        if directory is not None and self.tokenizer.kind == "bytes":
            log.warning("no tokenizer.json in %s: using the byte-level fallback tokenizer (text will not match "
                        "the model's real vocabulary)", directory)
        self.eos_token_ids = mc.eos_token_ids + generation_config_eos(directory, mc.eos_token_ids)

        # Cold-start phases, logged as triage/engines/reference.py's markers read them.
        log.info("Loading weights (load format %s)", config.load_format)
        tic = time.perf_counter()
        model = build_model(mc, self.dtype, config.device, config.load_format, directory, config.seed)
        # The bytes read from storage: none for generated (dummy) weights, whose time is not a read.
        read_bytes = sum(f.stat().st_size for f in safetensors_files(directory)) \
            if model.load_format == "safetensors" and directory is not None else 0
        self.load_format = model.load_format
        self.weight_storage = self._store_weights(model)
        self.quant_summary = self._quantize(model)      # the weights' storage and quantization are part of the load
        log.info("Loading weights took %.3f seconds, %d bytes", time.perf_counter() - tic, read_bytes)
        kv_bytes_per_token = kv_format.bytes_per_token(mc.num_hidden_layers, mc.num_key_value_heads, mc.head_dim)
        self._kv_bytes_per_token = kv_bytes_per_token
        capacity_tokens = self._kv_capacity_tokens(kv_bytes_per_token)
        if config.kv_layout == "paged":
            num_blocks = capacity_tokens // config.block_size
            if num_blocks < 1:
                raise EngineError("the KV budget holds less than one block; raise kv_cache_bytes/num_kv_blocks")
            self.allocator = BlockManager(num_blocks, config.block_size, config.enable_prefix_caching)
            block_size = config.block_size
        else:
            num_blocks = min(capacity_tokens // self.max_model_len, config.max_num_seqs)
            if num_blocks < 1:
                raise EngineError(f"the KV budget ({capacity_tokens} tokens) cannot hold one contiguous slot of "
                                  f"max_model_len={self.max_model_len}; lower max_model_len or raise the budget")
            self.allocator = ContiguousAllocator(num_blocks, self.max_model_len)
            block_size = self.max_model_len
        self.scheduler = make_scheduler(config.scheduler, self.allocator, config.max_num_seqs,
                                        config.max_num_batched_tokens, config.enable_chunked_prefill)
        tic = time.perf_counter()
        self.runner = ModelRunner(model, mc, num_blocks, block_size, kv_dtype, config.device, config.attention,
                                  kv_format)
        log.info("KV cache allocation took %.3f seconds, %d bytes", time.perf_counter() - tic,
                 self.runner.kv_cache_bytes)
        tic = time.perf_counter()
        with torch.no_grad():
            model.forward_full([mc.bos_token_id or 0] * min(8, self.max_model_len))
        log.info("Warm-up forward pass took %.3f seconds", time.perf_counter() - tic)
        self.compile_choice = self._compile_decode()
        self.kv_cache_dtype = kv_format.name
        self.kv_cache_tokens_capacity = num_blocks * block_size
        self._seqs: dict[str, Sequence] = {}
        self._generators: dict[str, torch.Generator] = {}
        self._default_generator = torch.Generator().manual_seed(config.seed)
        self._generate_calls = itertools.count()
        self._prompt_tokens_total = 0
        self._generation_tokens_total = 0
        self._num_steps = 0
        self.last_step: StepStats | None = None

    # -- setup helpers ---------------------------------------------------------------------------
    def _store_weights(self, model) -> str:
        """fp32 compute on a CPU: keep bf16-valued weights in bf16 when that measures faster. Returns the
        storage dtype of the Linear weights, and adds the reason to the dtype note."""
        cfg, mc = self.config, self.model_config
        if self.dtype != torch.float32 or cfg.weight_storage == "fp32":
            return DTYPE_NAMES[self.dtype]
        from triage.reference_engine.layers.kernels.bf16_weights import (
            bf16_exact,
            choose_storage,
            kernel,
            store_bf16,
        )

        if cfg.weight_storage == "bf16":
            if not bf16_exact(model):
                raise EngineError("weight_storage=bf16: the weights are not bf16 values (storing them would change them)")
            if kernel()[0] is None:
                raise EngineError(f"weight_storage=bf16: {kernel()[1]}")
            use, why = True, "bf16-stored weights, fp32 arithmetic (forced)"
        else:
            use, why = choose_storage(model, mc.hidden_size, mc.intermediate_size, cfg.device)
        self.dtype_note = f"{self.dtype_note}; {why}"
        if not use:
            return "float32"
        store_bf16(model)
        return "bfloat16"

    def _compile_decode(self):
        """compile auto / on: the decode step through torch.compile (engine/compiled_step.py logs the phase)."""
        cfg = self.config
        try:
            return choose_compile(self.runner, cfg.compile, cfg.max_num_seqs, cfg.compile_cache_dir)
        except RuntimeError as e:
            raise EngineError(str(e)) from None

    def _quantize(self, model):
        """``quantization`` fp8 / int4: swap the Linear layers (layers/quant/handlers.py) and say what runs."""
        scheme = self.config.quantization
        if scheme == "none":
            return None
        from triage.reference_engine.layers.quant import quantize_model

        summary = quantize_model(model, scheme)
        paths = ", ".join(f"{p}×{n}" for p, n in summary.paths.items()) or "no layer fits"
        why = (summary.kernel or {}).get("reason")
        self.dtype_note = f"{self.dtype_note}; {scheme} weights: {paths}" + (f" ({why})" if why else "")
        return summary

    def _kv_capacity_tokens(self, bytes_per_token: int) -> int:
        cfg = self.config
        if cfg.num_kv_blocks is not None:
            return cfg.num_kv_blocks * cfg.block_size
        if cfg.kv_cache_bytes is not None:
            return cfg.kv_cache_bytes // bytes_per_token
        if cfg.device.startswith("cuda"):
            free_b, total_b = torch.cuda.mem_get_info(torch.device(cfg.device))
            used_b = total_b - free_b
            budget = int(total_b * cfg.gpu_memory_utilization) - used_b
            if budget <= 0:
                raise EngineError(f"gpu_memory_utilization={cfg.gpu_memory_utilization} leaves no room for KV "
                                  f"after the weights ({used_b / 2**30:.1f} GiB used); raise it")
            return budget // bytes_per_token
        wanted = cfg.max_num_seqs * self.max_model_len * bytes_per_token
        available = _available_memory_bytes()
        cap = DEFAULT_CPU_KV_BUDGET_BYTES
        if available is not None:
            cap = min(cap, int(available * DEFAULT_CPU_KV_BUDGET_FRAC))
        return min(wanted, cap) // bytes_per_token

    # -- requests --------------------------------------------------------------------------------
    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams,
                    arrival_time: float | None = None) -> None:
        if not isinstance(params, SamplingParams):
            raise EngineError("params must be a SamplingParams")
        params.validate()
        if request_id in self._seqs:
            raise EngineError(f"request id {request_id!r} is already in use")
        if isinstance(prompt, str):
            token_ids = self.tokenizer.encode(prompt)
        else:
            token_ids = [int(t) for t in prompt]
        if not token_ids:
            raise EngineError("the prompt is empty")
        bad = [t for t in token_ids if not 0 <= t < self.model_config.vocab_size]
        if bad:
            raise EngineError(f"prompt token ids out of range [0, {self.model_config.vocab_size}): {bad[:5]}")
        total = len(token_ids) + params.max_tokens
        if total > self.max_model_len:
            raise EngineError(f"prompt ({len(token_ids)} tokens) + max_tokens ({params.max_tokens}) = {total} "
                              f"exceeds max_model_len={self.max_model_len}; shorten the prompt or lower max_tokens")
        cfg = self.config
        if (cfg.scheduler == "continuous" and not cfg.enable_chunked_prefill
                and total - 1 > cfg.max_num_batched_tokens):
            raise EngineError(f"prompt + max_tokens = {total} tokens cannot be prefilled (or recomputed after a "
                              f"preemption) within max_num_batched_tokens={cfg.max_num_batched_tokens} without "
                              f"chunked prefill; enable chunked prefill or raise max_num_batched_tokens")
        if total > self.kv_cache_tokens_capacity and self.config.kv_layout == "paged":
            raise EngineError(f"prompt + max_tokens = {total} tokens exceeds the whole KV cache "
                              f"({self.kv_cache_tokens_capacity} tokens); raise the KV budget")
        arrival = time.monotonic() if arrival_time is None else arrival_time
        seq = Sequence(request_id, token_ids, params, arrival)
        seq.detok = IncrementalDetokenizer(self.tokenizer, token_ids, params.stop)
        if params.seed is not None:
            self._generators[request_id] = torch.Generator().manual_seed(params.seed)
        self._seqs[request_id] = seq
        self.scheduler.add(seq)

    def abort(self, request_id: str) -> bool:
        seq = self._seqs.pop(request_id, None)
        if seq is None:
            return False
        self.scheduler.finish(seq, "abort")
        self._generators.pop(request_id, None)
        return True

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    # -- one iteration ---------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        t0 = time.perf_counter()
        batch = self.scheduler.schedule()
        if batch.is_empty:
            self.last_step = StepStats(0, 0, 0, 0, len(batch.preempted), time.perf_counter() - t0, 0)
            return []
        ready, tokens = self._run(batch)
        outputs = self._postprocess(ready, tokens)
        self._record_step(batch, time.perf_counter() - t0)
        return outputs

    def _run(self, batch) -> tuple[list[Sequence], list[int]]:
        """One forward pass over the batch, then one sampled token for each sequence it completes."""
        logits, ready = self.runner.execute(batch, self.allocator.take_pending_copies())
        ready_after = self.scheduler.update_after_step(batch)
        if [s.request_id for s in ready] != [s.request_id for s in ready_after]:
            raise RuntimeError("runner and scheduler disagree on which sequences are complete")
        return ready, self._sample(logits, ready)

    def _sample(self, logits, ready: list[Sequence]) -> list[int]:
        """EOS is banned until a sequence reaches min_tokens; a seeded request draws from its own generator."""
        if not ready:
            return []
        banned = [self.eos_token_ids if s.num_output_tokens < s.params.min_tokens and not s.is_finished else ()
                  for s in ready]
        generators = [self._generators.get(s.request_id, self._default_generator) for s in ready]
        return self.runner.sample(logits, ready, generators, banned)

    def _postprocess(self, ready: list[Sequence], tokens: list[int]) -> list[RequestOutput]:
        now = time.monotonic()
        outputs = []
        for seq, token in zip(ready, tokens, strict=True):
            if seq.is_finished:                # a static batch's padding row: compute only
                seq.append_token(token)
                continue
            if seq.num_output_tokens == 0:
                self._prompt_tokens_total += seq.num_prompt_tokens
                seq.times.first_token_s = now
            seq.append_token(token)
            self._generation_tokens_total += 1
            outputs.append(self._process_token(seq, token))
        return outputs

    def _record_step(self, batch, duration_s: float) -> None:
        self._num_steps += 1
        self.last_step = StepStats(batch.num_prefill_tokens, batch.num_decode_tokens, batch.num_tokens,
                                   len(batch.entries), len(batch.preempted), duration_s,
                                   batch.num_padding_tokens)

    def _process_token(self, seq: Sequence, token: int) -> RequestOutput:
        p = seq.params
        may_stop = seq.num_output_tokens >= p.min_tokens
        stopped = seq.detok.add_token(token, check_stop=may_stop)
        reason = None
        if stopped:
            reason = "stop"
        elif may_stop and not p.ignore_eos and token in self.eos_token_ids:
            reason = "stop"
        elif seq.num_output_tokens >= p.max_tokens or seq.num_tokens >= self.max_model_len:
            reason = "length"
        if reason is not None:
            if not stopped:
                seq.detok.flush()
            self.scheduler.finish(seq, reason)
            self._seqs.pop(seq.request_id, None)
            self._generators.pop(seq.request_id, None)
        return RequestOutput(
            request_id=seq.request_id, new_token_ids=[token], text_delta=seq.detok.take_delta(reason is not None),
            finished=reason is not None, finish_reason=reason, num_prompt_tokens=seq.num_prompt_tokens,
            num_output_tokens=seq.num_output_tokens, num_cached_tokens=seq.num_cached_tokens,
            times=RequestTimes(**{f: getattr(seq.times, f) for f in RequestTimes.__slots__}))

    # -- convenience -----------------------------------------------------------------------------
    def generate(self, prompts: list[str | list[int]],
                 params: SamplingParams | list[SamplingParams]) -> list[Completion]:
        """Run the prompts to completion (other queued requests progress too); results in input order."""
        if isinstance(params, SamplingParams):
            params = [params] * len(prompts)
        if len(params) != len(prompts):
            raise EngineError(f"{len(prompts)} prompts but {len(params)} SamplingParams")
        batch_id = next(self._generate_calls)
        ids = [f"generate-{batch_id}-{i}" for i in range(len(prompts))]
        seqs = {}
        try:
            for rid, prompt, p in zip(ids, prompts, params, strict=True):
                self.add_request(rid, prompt, p)
                seqs[rid] = self._seqs[rid]
        except EngineError:
            for rid in seqs:                    # all or nothing: drop the ones already queued
                self.abort(rid)
            raise
        pending = set(ids)
        tokens: dict[str, list[int]] = {rid: [] for rid in ids}
        while pending:
            for out in self.step():
                if out.request_id in tokens:
                    tokens[out.request_id].extend(out.new_token_ids)
                if out.finished:
                    pending.discard(out.request_id)
        return [Completion(request_id=rid, prompt_token_ids=seqs[rid].prompt_token_ids,
                           output_token_ids=tokens[rid], text=seqs[rid].detok.text,
                           finish_reason=seqs[rid].finish_reason, times=seqs[rid].times) for rid in ids]

    def stats(self) -> EngineStats:
        a = self.allocator.stats()
        c = self.scheduler.counters
        return EngineStats(
            num_requests_running=sum(1 for s in self.scheduler.running if not s.is_finished), num_requests_waiting=len(self.scheduler.waiting),
            kv_cache_usage_frac=a.usage_frac, num_kv_blocks_total=a.num_blocks_total,
            num_kv_blocks_free=a.num_blocks_free, block_size=self.runner.block_size,
            kv_cache_bytes=self.runner.kv_cache_bytes, kv_cache_tokens_capacity=self.kv_cache_tokens_capacity,
            num_preemptions_total=c.num_preemptions_total, prefix_cache_queries_total=c.prefix_cache_queries_total,
            prefix_cache_hits_total=c.prefix_cache_hits_total, prompt_tokens_total=self._prompt_tokens_total,
            generation_tokens_total=self._generation_tokens_total, dtype=DTYPE_NAMES[self.dtype],
            attention_backend=self.runner.backend.name, kv_layout=self.config.kv_layout,
            scheduler=self.config.scheduler, dtype_note=self.dtype_note, kv_cache_dtype=self.kv_cache_dtype,
            kv_tokens_reserved=a.tokens_reserved, kv_tokens_used=a.tokens_used,
            kv_reserved_bytes=a.tokens_reserved * self._kv_bytes_per_token,
            kv_used_bytes=a.tokens_used * self._kv_bytes_per_token,
            kv_fragmentation_frac=a.fragmentation_frac, num_steps_total=self._num_steps,
            decode_step=self.compile_choice.step)
