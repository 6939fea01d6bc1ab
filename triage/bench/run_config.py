"""What one `triage bench` run does: the parsed, validated options. Built by the command, read by the runner."""
from __future__ import annotations

import dataclasses
import enum
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from triage.bench.options import BenchOptions, LoadOptions, TargetOptions, WorkloadOptions
from triage.core.bench_data import BenchRunConfig, BenchShard, Slo, Workload
from triage.core.errors import UsageError
from triage.core.redact import REDACTED, redact_header, redact_text
from triage.core.report import level_name

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
# Requests per level when neither --num-requests nor --duration is given: max(MIN, SLOT x concurrency) for a
# concurrency level, max(MIN, SECONDS x rate) for a rate level (`--num-requests`'s help quotes these).
MIN_REQUESTS_PER_LEVEL = 8
REQUESTS_PER_SLOT = 4
SECONDS_OF_ARRIVALS = 10
# The defaults that differ between a run against --url and one against the bundled reference engine (which
# runs on this host's CPU, so it gets a small load). The options' help quotes these.
URL_DEFAULTS = {"concurrency": "1,4,16,64", "input_len": 512, "output_len": 256, "num_requests": None, "warmup": 2}
EMBEDDED_DEFAULTS = {"concurrency": "1,4", "input_len": 32, "output_len": 16, "num_requests": 8, "warmup": 2}
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)


class Endpoint(str, enum.Enum):
    CHAT = "chat"
    COMPLETIONS = "completions"

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self is Endpoint.CHAT else "/v1/completions"


class LenDist(str, enum.Enum):
    FIXED = "fixed"
    UNIFORM = "uniform"
    NORMAL = "normal"
    LOGNORMAL = "lognormal"


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """One load point: a closed loop with `concurrency` in flight, or an open loop at `request_rate` req/s.
    `input_len` is the prompt length of this level in an --input-len sweep (None: the run's one length)."""

    concurrency: int | None = None
    request_rate: float | None = None
    input_len: int | None = None

    @property
    def name(self) -> str:
        return level_name(self)

    @property
    def closed_loop(self) -> bool:
        """A fixed number in flight (closed loop), else an arrival rate (open loop)."""
        return self.concurrency is not None

    @property
    def load(self) -> float:
        """Requests in flight, or arrivals per second: what sizes the level's prompt slice."""
        return self.concurrency or self.request_rate or 1

    def connections_wanted(self, max_in_flight: int) -> int:
        """Connections to open before the level's window: its concurrency, or about one second of arrivals."""
        if self.concurrency is not None:
            return self.concurrency
        return min(max_in_flight, max(1, math.ceil(self.request_rate or 1)))


REPEAT_ORDERS = ("rounds", "back-to-back")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    url: str
    model: str | None = None
    levels: tuple[LevelSpec, ...] = (LevelSpec(concurrency=1),)
    num_requests: int | None = None
    duration_s: float | None = None
    warmup: int = 2
    repeat: int = 1
    seed: int = 0
    endpoint: Endpoint = Endpoint.COMPLETIONS
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0
    input_len: int = 512
    output_len: int = 256
    len_dist: LenDist = LenDist.FIXED
    shared_prefix_len: int = 0
    dataset: Path | None = None
    slo: dict[str, float] | None = None
    burstiness: float = 1.0
    max_in_flight: int = 512
    scrape_interval_s: float = 0.5
    gpu_sample_interval_s: float = 0.5
    # Connections and identity (pool.py): open the pool to each level's load before its measured window; the
    # header that carries each request's id (None: none is sent).
    warm_connections: bool = True
    request_id_header: str | None = "X-Request-Id"
    # --repeat K: "rounds" runs level 1, level 2, ..., then again (each level's repeats spread over the run);
    # "back-to-back" runs a level's K repeats one after the other.
    repeat_order: str = "rounds"
    # Workloads (workloads.py): multi-turn chat, trace replay, prefix groups, ramps.
    turns: int = 1
    think_time_ms: float = 0.0
    trace: Any = None  # workloads.Trace
    time_scales: tuple[float, ...] = (1.0,)  # trace replay: one level per scale
    prefix_groups: int = 0
    prefix_len: int = 0
    ramp: Any = None  # workloads.Ramp
    window_s: float | None = None
    # --shard/--workers (workers.py): this shard's place in the whole run; None alone.
    shard: BenchShard | None = None
    # Several replicas (fleet.py): every URL (url is the first) and how requests are spread over them.
    urls: tuple[str, ...] = ()
    balance: str = "round-robin"
    # Each URL's role (prefill | decode | both) when its `#fragment` named one (docs/TOPOLOGIES.md), else None.
    roles: tuple[str | None, ...] = ()

    def pool_size(self) -> int:
        """Connections the run may hold at once: its largest concurrency, or --max-in-flight for a rate level."""
        sizes = [lv.concurrency for lv in self.levels if lv.concurrency is not None]
        if any(lv.request_rate is not None for lv in self.levels):
            sizes.append(self.max_in_flight)
        return max([1, *sizes])

    def peak_concurrency(self) -> int:
        return max([lv.concurrency or 1 for lv in self.levels])

    @property
    def input_lens(self) -> tuple[int, ...]:
        """The swept prompt lengths in run order (empty when the run has one length)."""
        return tuple(dict.fromkeys(lv.input_len for lv in self.levels if lv.input_len is not None))

    def requests_for(self, level: LevelSpec) -> int | None:
        """Requests issued per level: --num-requests, else (with no --duration) a count scaled to the level."""
        if self.num_requests is not None:
            return self.num_requests
        if self.duration_s is not None:
            return None
        if level.concurrency is not None:
            return max(MIN_REQUESTS_PER_LEVEL, REQUESTS_PER_SLOT * level.concurrency)
        return max(MIN_REQUESTS_PER_LEVEL, round(SECONDS_OF_ARRIVALS * (level.request_rate or 1.0)))

    def report_config(self) -> BenchRunConfig:
        """The config block of the report. Secrets never appear: header values that look like auth are masked."""
        fleet = len(self.urls) > 1
        return BenchRunConfig(
            url=redact_text(self.url), model=self.model, endpoint=self.endpoint.value,
            concurrency=tuple(dict.fromkeys(lv.concurrency for lv in self.levels if lv.concurrency is not None)),
            request_rate=tuple(dict.fromkeys(lv.request_rate for lv in self.levels if lv.request_rate is not None)),
            burstiness=self.burstiness, num_requests=self.num_requests, duration_s=self.duration_s,
            warmup=self.warmup, repeat=self.repeat, seed=self.seed, input_len=self.input_len,
            input_len_sweep=self.input_lens or None, output_len=self.output_len, len_dist=self.len_dist.value,
            shared_prefix_len=self.shared_prefix_len, dataset=str(self.dataset) if self.dataset else None,
            slo=Slo(**self.slo) if self.slo else None, timeout_s=self.timeout_s, max_in_flight=self.max_in_flight,
            api_key=REDACTED if self.api_key else None,
            headers={k: redact_header(k, v) for k, v in self.headers.items()},
            warm_connections=self.warm_connections, request_id_header=self.request_id_header,
            repeat_order=self.repeat_order, workload=self.workload(), shard=self.shard,
            urls=tuple(redact_text(u) for u in self.urls) if fleet else None,
            balance=self.balance if fleet else None, roles=self.roles if any(self.roles) else None)

    def workload(self) -> Workload:
        """What shaped the load, for `compare` to check that two runs are comparable."""
        kind = ("trace" if self.trace is not None else "multi_turn" if self.turns > 1 else
                "ramp" if self.ramp is not None else "prefix_groups" if self.prefix_groups else
                "dataset" if self.dataset else "synthetic")
        return Workload(kind=kind, turns=self.turns, think_time_ms=self.think_time_ms,
                        prefix_groups=self.prefix_groups, prefix_len=self.prefix_len,
                        ramp=self.ramp.text if self.ramp is not None else None, window_s=self.window_s,
                        trace=self.trace.report_record(self.time_scales) if self.trace is not None else None)


def parse_int_list(text: str, flag: str, example: str = "1,4,16,64") -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected comma-separated integers, e.g. {example}") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{flag} {text!r}: every value must be an integer >= 1")
    _no_duplicates(values, text, flag)
    return values


def _no_duplicates(values: list, text: str, flag: str) -> None:
    if len(set(values)) != len(values):
        raise UsageError(f"{flag} {text!r} names a level twice: to run a level several times, use --repeat K")


def parse_input_lens(text: str | int | None, shared_prefix_len: int) -> list[int]:
    """--input-len: one prompt length, or a comma list for a sweep (run shortest first). Every length must be
    longer than the shared prefix, which is part of each prompt."""
    if text is None:
        return []
    values = sorted(parse_int_list(str(text), "--input-len", example="512,2048,8192"))
    too_short = [v for v in values if v <= shared_prefix_len]
    if too_short:
        raise UsageError(f"--input-len {text}: {', '.join(map(str, too_short))} is not longer than "
                         f"--shared-prefix-len {shared_prefix_len} (the prefix is part of the prompt): raise the "
                         "length or lower the prefix")
    return values


def parse_float_list(text: str, flag: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected comma-separated numbers, e.g. 1,2,4") from None
    if not values or any(not v > 0 for v in values):
        raise UsageError(f"{flag} {text!r}: every rate must be a number > 0 (requests per second)")
    _no_duplicates(values, text, flag)
    return values


def parse_slo(text: str | None) -> dict[str, float] | None:
    """`ttft_ms=500,tpot_ms=50` -> {"ttft_ms": 500.0, "tpot_ms": 50.0}."""
    if not text:
        return None
    slo: dict[str, float] = {}
    for part in text.split(","):
        key, eq, value = part.strip().partition("=")
        if not eq or key not in SLO_KEYS:
            raise UsageError(f"--slo {text!r}: each item must be KEY=MS with KEY one of {', '.join(SLO_KEYS)}")
        try:
            slo[key] = float(value)
        except ValueError:
            raise UsageError(f"--slo {text!r}: {value!r} is not a number of milliseconds") from None
        if not slo[key] > 0:
            raise UsageError(f"--slo {text!r}: {key} must be > 0")
    return slo


def parse_headers(items: list[str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {item!r}: expected NAME:VALUE, e.g. --header 'X-Team: infra'")
        headers[name.strip()] = value.strip()
    return headers


def _choice(flag: str, value: str, enum_cls: type[enum.Enum]) -> Any:
    try:
        return enum_cls(value)
    except ValueError:
        raise UsageError(f"{flag} {value!r} is not one of {', '.join(e.value for e in enum_cls)}") from None


def _check_url(url: str | None) -> None:
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--url {url!r}: expected http(s)://HOST[:PORT], e.g. http://127.0.0.1:8000")


def _check_sizes(target: TargetOptions, load: LoadOptions, workload: WorkloadOptions) -> list[int]:
    """The counts and durations in range; the --input-len list parsed (the sweep's lengths, or [])."""
    for flag, value in (("--repeat", load.repeat), ("--timeout", target.timeout_s),
                        ("--burstiness", load.burstiness), ("--max-in-flight", load.max_in_flight)):
        if not value > 0:
            raise UsageError(f"{flag} must be > 0")
    input_lens = parse_input_lens(workload.input_len, workload.shared_prefix_len)
    for flag, given in (("--num-requests", load.num_requests), ("--duration", load.duration_s),
                        ("--output-len", workload.output_len)):
        if given is not None and not given > 0:
            raise UsageError(f"{flag} must be > 0")
    if (load.warmup is not None and load.warmup < 0) or workload.shared_prefix_len < 0:
        raise UsageError("--warmup and --shared-prefix-len must be >= 0")
    return input_lens


def _check_dataset(workload: WorkloadOptions) -> None:
    dataset = workload.dataset
    if dataset is None:
        return
    if not dataset.is_file():
        raise UsageError(f"--dataset {dataset}: no such file")
    ignored = [flag for flag, given in (("--input-len", workload.input_len is not None),
                                        ("--len-dist", workload.len_dist != "fixed"),
                                        ("--shared-prefix-len", workload.shared_prefix_len > 0)) if given]
    if ignored:
        raise UsageError(f"--dataset supplies the prompts, so {', '.join(ignored)} would be ignored: drop "
                         f"{'it' if len(ignored) == 1 else 'them'} (--output-len still sizes replies the "
                         "dataset does not record)")


def _levels(load: LoadOptions, input_lens: list[int], default_concurrency: str) -> tuple[LevelSpec, ...]:
    """--concurrency and --rate as levels (else the default concurrency list), once per swept length."""
    levels = [LevelSpec(concurrency=c) for c in parse_int_list(load.concurrency, "--concurrency")] \
        if load.concurrency else []
    levels += [LevelSpec(request_rate=r) for r in parse_float_list(load.rate, "--rate")] if load.rate else []
    if not levels:
        levels = [LevelSpec(concurrency=c) for c in parse_int_list(default_concurrency, "--concurrency")]
    if not any(lv.request_rate is not None for lv in levels):
        open_loop_only = [flag for flag, given in (("--burstiness", load.burstiness != 1.0),
                                                   ("--max-in-flight", load.max_in_flight != 512)) if given]
        if open_loop_only:
            raise UsageError(f"{', '.join(open_loop_only)} only applies to open-loop levels, and no --rate level "
                             "was given: add --rate R,... or drop it")
    if len(input_lens) > 1:
        levels = [dataclasses.replace(lv, input_len=n) for lv in levels for n in input_lens]
    return tuple(levels)


def _request_id_header(load: LoadOptions, target: TargetOptions) -> str | None:
    if load.repeat_order not in REPEAT_ORDERS:
        raise UsageError(f"--repeat-order {load.repeat_order!r}: use {' or '.join(REPEAT_ORDERS)}")
    header = (target.request_id_header or "").strip() or None
    if header is not None and not _TOKEN.match(header):
        raise UsageError(f"--request-id-header {header!r} is not a valid header name")
    return header


def base_config(opts: BenchOptions, url: str | None, defaults: dict[str, Any]) -> BenchConfig:
    """The target, load and prompt options, checked, as a BenchConfig (workloads not yet folded in).
    `defaults` fills what was not given (they differ for the embedded server and for --url). Every bad
    value raises UsageError naming the flag."""
    target, load, workload = opts.target, opts.load, opts.workload
    _check_url(url)
    input_lens = _check_sizes(target, load, workload)
    _check_dataset(workload)
    levels = _levels(load, input_lens, defaults["concurrency"])
    num_requests = load.num_requests
    if num_requests is None and load.duration_s is None:
        num_requests = defaults["num_requests"]
    request_id_header = _request_id_header(load, target)
    return BenchConfig(
        url=url or "", model=target.model, levels=levels, num_requests=num_requests, duration_s=load.duration_s,
        warmup=defaults["warmup"] if load.warmup is None else load.warmup, repeat=load.repeat, seed=load.seed,
        endpoint=_choice("--endpoint", target.endpoint, Endpoint), api_key=target.api_key,
        headers=parse_headers(list(target.headers)), timeout_s=target.timeout_s,
        input_len=input_lens[0] if input_lens else defaults["input_len"],
        output_len=workload.output_len or defaults["output_len"],
        len_dist=_choice("--len-dist", workload.len_dist, LenDist), shared_prefix_len=workload.shared_prefix_len,
        dataset=workload.dataset, slo=parse_slo(opts.slo.slo), burstiness=load.burstiness,
        max_in_flight=load.max_in_flight, warm_connections=target.warm_connections,
        request_id_header=request_id_header, repeat_order=load.repeat_order)
