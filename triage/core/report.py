"""The report model: frozen dataclasses that every command writes and `compare` reads.

The JSON form is defined in ../shared/design/contract.md and checked by reports/schema/.
Only triage/core/report_io.py turns these into JSON and back.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol

from triage.core.bench_data import BenchRunConfig, LevelConnections, LevelGpu, LevelServer, Replica
from triage.core.snapshot import ProbeResult

SCHEMA_VERSION = "1.1"   # 1.1: probe data typed per probe (every field written, null when not measured)


class ReportKind(str, enum.Enum):
    DIAGNOSE = "diagnose"
    BENCH = "bench"
    BASELINE = "baseline"
    PLAN = "plan"
    COMPARE = "compare"


class Severity(str, enum.Enum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for critical … 4 for info: sort ascending to get most severe first."""
        return list(Severity).index(self)

    def at_least(self, other: Severity) -> bool:
        return self.rank <= other.rank


class Certainty(str, enum.Enum):
    CONFIRMED = "confirmed"
    LIKELY = "likely"
    POSSIBLE = "possible"

    @property
    def rank(self) -> int:
        return list(Certainty).index(self)


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int | None = None
    driver_version: str | None = None


@dataclass(frozen=True, slots=True)
class HostInfo:
    hostname: str
    os: str
    python: str
    cpu_model: str | None
    num_cpus: int | None
    memory_total_bytes: int | None
    gpus: tuple[GpuInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class Target:
    url: str | None = None
    engine: str | None = None  # vllm|sglang|tgi|reference|openai-compatible|None
    engine_version: str | None = None
    model: str | None = None
    urls: tuple[str, ...] | None = None  # bench with several --url: all of them (url is the first)
    says: str | None = None            # an unidentified server: what it says of itself (Server header, owned_by, /version)


@dataclass(frozen=True, slots=True)
class Fix:
    text: str
    commands: tuple[str, ...] = ()     # complete commands, each runnable as printed
    flags: tuple[str, ...] = ()        # settings for the server's command line, where its command is not known


class FindingKind(str, enum.Enum):
    """A problem has a symptom on this deployment (latency, throughput, queueing, memory pressure,
    errors, a hardware fault). An opportunity is a better configuration with no symptom seen: it is
    never above LOW (docs/RULES.md, "Severity policy")."""

    PROBLEM = "problem"
    OPPORTUNITY = "opportunity"


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    name: str
    severity: Severity
    certainty: Certainty
    title: str
    message: str
    evidence: dict[str, Any]
    fix: Fix
    references: tuple[str, ...] = ()
    # Codes of findings that this one explains (a causal chain, e.g. KV001 explains SCHED003).
    explains: tuple[str, ...] = ()
    kind: FindingKind = FindingKind.PROBLEM


@dataclass(frozen=True, slots=True)
class SkippedRule:
    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class LatencyStats:
    mean: float | None
    std: float | None
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class RequestCounts:
    completed: int
    failed: int
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    # Of `completed`: streams that ended normally with usage.completion_tokens > 0 but no text chunk (tokens that
    # decode to nothing printable, or all of max_tokens spent on special tokens). No TTFT, no ITL; not failures.
    completed_no_text: int = 0


@dataclass(frozen=True, slots=True)
class ClientStats:
    cpu_pct: float | None
    event_loop_lag_ms_p99: float | None
    achieved_concurrency: float | None
    valid: bool
    invalid_reason: str | None = None


class LoadPoint(Protocol):
    """What names a bench level: a bench LevelSpec (the runner's) or a BenchLevel (the report's)."""

    @property
    def concurrency(self) -> int | None: ...
    @property
    def request_rate(self) -> float | None: ...
    @property
    def input_len(self) -> int | None: ...


def level_name(level: LoadPoint, with_input_len: bool = True) -> str:
    """The one label of a bench level, everywhere (records, report, tables, plots, compare): c=4, rate=2/s,
    rate=0.5/s; in an --input-len sweep with the prompt length too (c=1 in=2048) unless `with_input_len` is off."""
    load = f"c={level.concurrency}" if level.concurrency is not None else f"rate={level.request_rate:g}/s"
    return load if level.input_len is None or not with_input_len else f"{load} in={level.input_len}"


@dataclass(frozen=True, slots=True)
class BenchLevel:
    concurrency: int | None
    request_rate: float | None
    duration_s: float
    requests: RequestCounts
    ttft_ms: LatencyStats
    tpot_ms: LatencyStats
    itl_ms: LatencyStats
    e2e_ms: LatencyStats
    output_tokens_per_s: float | None
    total_tokens_per_s: float | None
    requests_per_s: float | None
    goodput_requests_per_s: float | None
    slo_attainment_pct: float | None
    input_tokens_mean: float | None
    output_tokens_mean: float | None
    client: ClientStats
    server: LevelServer | None = None                # the server's /metrics over the level (bench_data.py)
    gpu: LevelGpu | None = None                      # the GPUs' NVML samples over the level
    # Per-request values for noise-aware compare: {"ttft_ms": [...], "tpot_ms": [...], "e2e_ms": [...]}.
    samples: dict[str, list[float]] | None = None
    # One summary per --repeat run of this level: [{"output_tokens_per_s": ..., "ttft_ms_p99": ...}, ...].
    repeats: list[dict[str, float]] | None = None
    notes: tuple[str, ...] = ()
    # The prompt length this level asked for in an --input-len sweep; None for a single-length or dataset run.
    input_len: int | None = None
    # Connection setup, apart from TTFT.
    connections: LevelConnections | None = None
    # Reasoning models: {requests, ttft_reasoning_ms: stats, ttft_answer_ms: stats} when reasoning was streamed.
    reasoning: dict[str, Any] | None = None
    # The workload's own view of the level: per-turn TTFT (multi-turn), the trace cut, a ramp window's span.
    workload: dict[str, Any] | None = None
    # Several --url: per replica its records' latencies and throughput and its own server window (fleet.py).
    replicas: tuple[Replica, ...] | None = None
    # --repeat K: the drift check of this level's first and last repeats (triage.core.drift.drift_check).
    drift: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class BenchSection:
    config: BenchRunConfig                           # the run's config and bookkeeping (bench_data.py)
    levels: tuple[BenchLevel, ...]
    # Filled by the saturation analysis: the knee level and the best-goodput level.
    summary: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Report:
    kind: ReportKind
    triage_version: str
    created_at: str
    command: tuple[str, ...]
    host: HostInfo
    target: Target = field(default_factory=Target)
    probes: tuple[ProbeResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    skipped_rules: tuple[SkippedRule, ...] = ()
    bench: BenchSection | None = None
    baseline: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    compare: dict[str, Any] | None = None
    schema_version: str = SCHEMA_VERSION


def new_report(kind: ReportKind, host: HostInfo, target: Target | None = None, **fields: Any) -> Report:
    """A report stamped with triage's version, the time (UTC) and the redacted command line."""
    import sys
    from datetime import datetime, timezone

    from triage import __version__
    from triage.core.redact import redact_argv

    return Report(
        kind=kind,
        triage_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        command=tuple(redact_argv(["triage", *sys.argv[1:]])),
        host=host,
        target=target or Target(),
        **fields,
    )


def plan_weight_bytes(plan: dict[str, Any] | None) -> float | None:
    """The model weight bytes a `triage plan` report's section gives ({"model": {"weight_bytes": ...}},
    triage/plan/section.py), or None."""
    model = (plan or {}).get("model")
    value = model.get("weight_bytes") if isinstance(model, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
