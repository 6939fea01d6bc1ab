"""Context: how a rule reads its inputs. Every accessor either returns a measured value or raises
MissingInput with a reason a person can act on; nothing silently defaults to 0 or False."""
from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from triage.core.bench_data import BenchRunConfig, LevelServer
from triage.core.model_presets import preset_key
from triage.core.probe_data import (
    EngineIdentityData,
    GpuData,
    GpuDevice,
    LogsData,
    Payload,
    ServerConfigData,
    ServerMetricsData,
    ServerProcessData,
)
from triage.core.report import BenchLevel, BenchSection, Report, plan_weight_bytes
from triage.core.snapshot import Snapshot
from triage.core.specs import match_nvml_name
from triage.engines import get
from triage.rules.base import MissingInput
from triage.rules.engine_info import EngineInfo, normalise_engine, parse_version
from triage.rules.rules_config import RulesConfig

P = TypeVar("P", bound=Payload)


def metrics_kv_usage(metrics: ServerMetricsData) -> tuple[float | None, str]:
    """The window's peak KV usage when the probe has it, else the last sample; with its evidence key."""
    if metrics.kv_cache_usage_frac_max is not None:
        return metrics.kv_cache_usage_frac_max, "server_metrics.kv_cache_usage_frac_max"
    return metrics.kv_cache_usage_frac, "server_metrics.kv_cache_usage_frac"


def level_label(level: BenchLevel) -> str:
    """`bench.c16` for a concurrency level, `bench.r2.5` for a rate level: the evidence key prefix."""
    if level.concurrency is not None:
        return f"bench.c{level.concurrency}"
    if level.request_rate is not None:
        return f"bench.r{level.request_rate:g}"
    return "bench.level"


FP8_MIN_CC = (8, 9)   # the first compute capability with FP8 tensor cores (Ada)


def _kv_signals(evidence: dict[str, Any], limit: float, usage: tuple[float | None, str],
                waiting: tuple[float | None, str], preempt: tuple[float | None, str]) -> bool:
    """Add one source's KV-pressure evidence (usage >= limit with requests waiting, or preemptions) to
    `evidence`; True when the source measured any of it."""
    seen = False
    if usage[0] is not None and waiting[0] is not None:
        seen = True
        if usage[0] >= limit and waiting[0] > 0:
            evidence[usage[1]], evidence[waiting[1]] = usage[0], waiting[0]
    if preempt[0] is not None:
        seen = True
        if preempt[0] > 0:
            evidence[preempt[1]] = preempt[0]
    return seen


@dataclass(frozen=True, slots=True)
class Context:
    snapshot: Snapshot
    bench: BenchSection | None
    baseline: Report | None                 # an earlier report of this deployment (`diagnose --baseline`)
    config: RulesConfig

    # --- thresholds ------------------------------------------------------------------------------
    def th(self, key: str) -> float:
        return self.config.threshold(key)

    # --- probes ----------------------------------------------------------------------------------
    def has(self, probe: str) -> bool:
        return self.snapshot.data(probe) is not None

    def need(self, cls: type[P]) -> P:
        """The probe's payload, or MissingInput saying why the probe has none."""
        name = cls.PROBE
        result = self.snapshot.get(name)
        if result is None:
            raise MissingInput(f"probe {name} did not run")
        if not result.ok:
            why = f": {result.reason}" if result.reason else ""
            raise MissingInput(f"probe {name} is {result.status.value}{why}")
        if not isinstance(result.data, cls):
            raise MissingInput(f"probe {name} measured nothing")
        return result.data

    def seen(self, cls: type[P]) -> P:
        """The probe's payload when it ran ok, else an empty one (every field None): for evidence that
        is nice to have."""
        data = self.snapshot.payload(cls)
        return data if data is not None else cls()

    @staticmethod
    def measured(value: Any, what: str) -> Any:
        """`value`, or MissingInput when it is None: `what` (probe.field) was not measured."""
        if value is None:
            raise MissingInput(f"{what} was not measured")
        return value

    def probe_note(self, name: str) -> str:
        """'' when the probe ran ok, else '; probe NAME is STATUS: REASON' to append to a skip reason."""
        result = self.snapshot.get(name)
        if result is None:
            return f"; probe {name} did not run"
        if result.ok:
            return ""
        return f"; probe {name} is {result.status.value}" + (f": {result.reason}" if result.reason else "")

    # --- GPUs ------------------------------------------------------------------------------------
    def gpus(self) -> list[GpuDevice]:
        gpus = self.need(GpuData).gpus
        if not gpus:
            raise MissingInput("probe gpu saw no GPU")
        return list(gpus)

    def server_pids(self) -> set[int]:
        data = self.snapshot.payload(ServerProcessData)
        if data is None or data.pid is None:
            return set()
        pids = {int(data.pid)}
        pids |= {int(p.pid) for p in data.processes if p.pid is not None}
        return pids

    def serving_gpus(self) -> list[GpuDevice]:
        """GPUs where the server's processes hold memory; all live GPUs when that is not known."""
        live = [g for g in self.gpus() if not g.lost]
        pids = self.server_pids()
        if pids:
            serving = [g for g in live if any(p.pid in pids for p in g.compute_processes or ())]
            if serving:
                return serving
        return live

    # --- server config and engine ----------------------------------------------------------------
    def setting(self, key: str | None, cache_key: str | None = None) -> tuple[Any, str | None]:
        """A server setting and the evidence key it was read from: server_config.<key> (a field of
        ServerConfigData), else the /metrics cache_config_info label `cache_key`; (None, None) when
        neither measured it. `key` None: only the /metrics label can say."""
        value = getattr(self.seen(ServerConfigData), key) if key is not None else None
        if value is not None:
            return value, f"server_config.{key}"
        if cache_key is not None:
            value = (self.seen(ServerMetricsData).cache_config or {}).get(cache_key)
            if value is not None:
                return value, f"server_metrics.cache_config.{cache_key}"
        return None, None

    def cfg_source(self, key: str) -> str | None:
        """Where server_config.<key> came from (cmdline, default, cache_config_info ...)."""
        return (self.seen(ServerConfigData).sources or {}).get(key)

    def engine(self) -> EngineInfo:
        cfg = self.seen(ServerConfigData)
        metrics = self.seen(ServerMetricsData)
        proc = self.seen(ServerProcessData)
        ident = self.seen(EngineIdentityData)
        logs = self.seen(LogsData)
        name = (self.config.target_engine or cfg.engine or ident.engine or metrics.engine or proc.engine
                or logs.engine)
        if name is None and self.bench is not None:
            name = next((lv.server.engine for lv in self.bench.levels if lv.server and lv.server.engine), None)
        version = self.config.target_engine_version or cfg.engine_version or ident.version or logs.engine_version
        engine = normalise_engine(name)
        v = parse_version(version)
        metrics_engine = cfg.metrics_engine or metrics.engine or name or ""
        module = get(engine)
        legacy = module.legacy_fn if module is not None else None
        v0 = bool(legacy and legacy(v, str(metrics_engine)))
        exported = str(cfg.metrics_engine or metrics.engine or "").lower()
        return EngineInfo(engine, version, v0, v1_metrics=legacy is not None and not v0 and exported == engine)

    def launch_argv(self) -> tuple[str, ...] | None:
        """The server's own command line (redacted), or the engine's launcher with the model, or None: what a
        fix's flags are set on to give a command that runs as printed."""
        proc = self.seen(ServerProcessData)
        engine = self.engine()
        if proc.cmdline and (engine.name is None or proc.engine in (None, engine.name)):
            return tuple(proc.cmdline)
        cfg = self.seen(ServerConfigData)
        model = cfg.model or cfg.served_model_name
        module = engine.module
        command = module.launch_command(model) if module is not None and model else None
        return tuple(shlex.split(command)) if command else None

    def plan_command(self) -> str | None:
        """`triage plan --model M --gpu G` for the served model on the serving GPU, when both are ones `triage plan`
        knows (a model preset, by its name or Hugging Face id; a GPU of the spec table); else None."""
        cfg = self.seen(ServerConfigData)
        model = next((m for m in (cfg.model, cfg.served_model_name) if m and preset_key(m)), None)
        try:
            gpus = self.serving_gpus()
        except MissingInput:
            gpus = []
        spec = match_nvml_name(gpus[0].name, gpus[0].memory_total_bytes) if gpus and gpus[0].name else None
        if model is None or spec is None:
            return None
        tp = cfg.tensor_parallel_size
        return f"triage plan --model {preset_key(model)} --gpu {spec.key}" + (f" --tp {tp}" if tp and tp > 1 else "")

    def identified_engine(self) -> EngineInfo:
        """engine(), or MissingInput when no probe, bench or triage.toml named the engine."""
        engine = self.engine()
        if engine.name is None:
            raise MissingInput("the serving engine was not identified (server_config.engine, server_metrics.engine, "
                               "server_process.engine, or [target] engine in triage.toml)")
        return engine

    # --- bench -----------------------------------------------------------------------------------
    def bench_section(self) -> BenchSection:
        if self.bench is None:
            raise MissingInput("no bench report (run `triage bench`, or pass `triage diagnose --bench REPORT.json`)")
        if not self.bench.levels:
            raise MissingInput("the bench report has no levels")
        return self.bench

    def levels(self, valid_only: bool = True) -> list[BenchLevel]:
        levels = list(self.bench_section().levels)
        if valid_only:
            levels = [lv for lv in levels if lv.client.valid]
            if not levels:
                raise MissingInput("every bench level was marked invalid (the client was the bottleneck; see BENCH001)")
        return levels

    def level_server(self) -> Iterator[tuple[BenchLevel, LevelServer]]:
        for lv in self.levels():
            if lv.server is not None:
                yield lv, lv.server

    def weight_bytes(self) -> tuple[float, str] | None:
        """The served model's weight bytes and where they came from: [model] weight_bytes in triage.toml, or a
        `triage plan` report given as the baseline. None when nothing says."""
        if self.config.model_weight_bytes:
            return float(self.config.model_weight_bytes), "config.model.weight_bytes"
        planned = plan_weight_bytes(self.baseline.plan) if self.baseline is not None else None
        return (planned, "baseline.plan.model.weight_bytes") if planned else None

    def bench_config(self) -> BenchRunConfig:
        """The bench report's config; every field None without a bench report."""
        return self.bench.config if self.bench is not None else BenchRunConfig()

    # --- shared judgements -----------------------------------------------------------------------
    def kv_pressure(self) -> tuple[bool, dict[str, Any]]:
        """Is the server KV-limited? True/False with the evidence; MissingInput when nothing can tell.

        Signals, any one is enough: KV usage >= common.kv_limited_usage_frac with requests waiting, or the
        preemption counter growing. (The log's "Maximum concurrency" is computed for max_model_len-long
        requests, so it says nothing about the real traffic and is not used.)
        """
        limit = self.th("common.kv_limited_usage_frac")
        evidence: dict[str, Any] = {}
        seen = False
        metrics = self.snapshot.payload(ServerMetricsData)
        if metrics is not None:
            usage, usage_key = metrics_kv_usage(metrics)
            seen |= _kv_signals(evidence, limit, (usage, usage_key),
                                (metrics.num_requests_waiting, "server_metrics.num_requests_waiting"),
                                (metrics.num_preemptions_delta, "server_metrics.num_preemptions_delta"))
        for lv in self.bench.levels if self.bench is not None else ():
            s, p = lv.server or LevelServer(), f"{level_label(lv)}.server"
            seen |= _kv_signals(evidence, limit, (s.kv_cache_usage_frac_max, f"{p}.kv_cache_usage_frac_max"),
                                (s.num_requests_waiting_max, f"{p}.num_requests_waiting_max"),
                                (s.num_preemptions_delta, f"{p}.num_preemptions_delta"))
        if not seen:
            raise MissingInput("cannot tell whether the server is KV-limited: no KV usage, queue or preemption "
                               "metrics (server_metrics or bench)")
        return bool(evidence), evidence

    def observed_max_total_tokens(self) -> tuple[float, str]:
        """The longest prompt+output seen, as (tokens, where from). Bench levels, then the bench config."""
        best: tuple[float, str] | None = None
        if self.bench is not None:
            for lv in self.bench.levels:
                if lv.input_tokens_mean is not None and lv.output_tokens_mean is not None:
                    total = lv.input_tokens_mean + lv.output_tokens_mean
                    if best is None or total > best[0]:
                        best = (total, f"{level_label(lv)}.input_tokens_mean+output_tokens_mean")
            cfg = self.bench_config()
            if isinstance(cfg.input_len, (int, float)) and cfg.output_len is not None:
                total = float(cfg.input_len) + float(cfg.output_len)
                if best is None or total > best[0]:
                    best = (total, "bench.config.input_len+output_len")
        if best is None:
            raise MissingInput("no observed prompt+output lengths (needs a bench report of this traffic)")
        return best

    def kv_capacity_tokens(self) -> tuple[float, str]:
        """How many tokens the KV cache holds, and where that came from."""
        logs = self.seen(LogsData)
        metrics = self.seen(ServerMetricsData)
        cache = metrics.cache_config or {}
        if logs.kv_cache_tokens is not None:
            return float(logs.kv_cache_tokens), "logs.kv_cache_tokens"
        if metrics.kv_cache_capacity_tokens is not None:
            return float(metrics.kv_cache_capacity_tokens), "server_metrics.kv_cache_capacity_tokens"
        if cache.get("num_gpu_blocks") is not None and cache.get("block_size") is not None:
            return (float(cache["num_gpu_blocks"]) * float(cache["block_size"]),
                    "server_metrics.cache_config.num_gpu_blocks*block_size")
        block = self.seen(ServerConfigData).block_size
        if logs.num_gpu_blocks is not None and block is not None:
            return float(logs.num_gpu_blocks) * float(block), "logs.num_gpu_blocks*server_config.block_size"
        raise MissingInput("the KV cache capacity is unknown (needs the server log's 'GPU KV cache size' line via "
                           "--log, or cache_config num_gpu_blocks / SGLang max_total_num_tokens in /metrics)")

    def vram_bytes(self) -> float | None:
        """The smallest serving GPU's memory, or None when not measured (the server log's CUDA out-of-memory line
        states it too)."""
        try:
            sizes = [g.memory_total_bytes for g in self.serving_gpus() if g.memory_total_bytes]
        except MissingInput:
            sizes = []
        return float(min(sizes)) if sizes else self.seen(LogsData).gpu_total_bytes

    def fp8_native(self) -> tuple[bool, tuple[int, int]]:
        """(the serving GPUs run FP8 natively for this engine, their smallest compute capability). FP8 tensor
        cores start at 8.9 (Ada: L4, L40S), and vLLM uses them from there (claim vllm.fp8-from-sm89)."""
        cc = self.compute_capability()
        module = self.engine().module
        floor = module.fp8_min_capability if module is not None and module.fp8_min_capability else FP8_MIN_CC
        return cc >= floor, cc

    def compute_capability(self) -> tuple[int, int]:
        caps = [tuple(g.compute_capability) for g in self.serving_gpus() if g.compute_capability]
        if not caps:
            raise MissingInput("gpu.compute_capability was not measured")
        return min(caps)  # type: ignore[return-value]
