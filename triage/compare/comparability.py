"""Can two bench reports be compared at all? Checked before any statistics.

- The workload (every key of the bench config section except the level set and the run's bookkeeping:
  endpoint, lengths and their distribution, dataset or trace, shared prefix or prefix groups, turns, ramp,
  burstiness, SLO, and keys added later) and the model must match: a difference is refused (exit 2) unless
  `--allow-different workload|model` says it is intended.
- The engine and its version, the server flags that change performance, and the hardware (GPU model and
  count; the CPU when there is no GPU) may differ: that is what people compare. They are listed as
  "what changed".
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from triage.core.bench_data import BenchRunConfig
from triage.core.convert import to_dict
from triage.core.errors import ReportError, UsageError
from triage.core.report import Report

BLOCKING = ("workload", "model")
ALLOWED = ("engine", "server_flags", "hardware")
CATEGORIES = BLOCKING + ALLOWED

# Config fields (BenchRunConfig's) that are not the workload: the level set (levels are matched, not compared),
# how long or how often it ran, the client's own settings and what the client learned about the server.
NOT_WORKLOAD = frozenset({
    "url", "model", "concurrency", "request_rate", "num_requests", "duration_s", "warmup", "repeat", "seed",
    "timeout_s", "max_in_flight", "api_key", "headers", "notes", "ignore_eos_sent", "continuous_usage_sent",
    "usage_reported", "tokens_per_word", "prompt_lengths_calibrated", "max_model_len", "source", "missing_fields",
    # when and how the bench ran, not what it asked: its wall-clock start, the idle connect time it measured,
    # its connection and request-id settings
    "started_at", "started_epoch_s", "idle_connect_ms_p50", "warm_connections", "request_id_header",
    "repeat_order",
    # what the client observed while it ran (a drift warning, a cut trace), not what it asked the server for
    "warnings",
})
# Config fields that are server settings a peer or the bench recorded.
SERVER_KEYS = ("max_model_len",)


@dataclass(frozen=True, slots=True)
class Difference:
    category: str        # one of CATEGORIES
    key: str
    base: Any
    cand: Any

    def shown(self) -> tuple[str, str]:
        """The base and candidate values as a person reads them (see _show)."""
        return _show(self.base, self.key), _show(self.cand, self.key)

    def describe(self) -> str:
        base, cand = self.shown()
        return f"{self.key}: {base} → {cand}"


_SHARE_SUFFIXES = ("_frac", "_fraction", "_share")


def _show(value: Any, key: str = "") -> str:
    """A config value for a person: unset, a list as a comma list, a whole number as an integer, a share
    (a key ending in _frac, _fraction or _share) as a percentage, a key ending in _pct with its %."""
    if value is None:
        return "unset"
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v) for v in value) or "[]"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_show(v, str(k))}" for k, v in value.items()) or "{}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key.endswith(_SHARE_SUFFIXES):
        return f"{100.0 * value:g}%"
    text = str(int(value)) if float(value).is_integer() else f"{value:g}"
    return text + "%" if key.endswith("_pct") else text


def _flat(key: str, base: Any, cand: Any) -> list[tuple[str, Any, Any]]:
    """(field, base, cand) for every field that differs, a nested mapping opened into dotted fields, so that
    only what differs is named (and no mapping is printed whole)."""
    if not (isinstance(base, dict) or isinstance(cand, dict)):
        return [] if base == cand else [(key, base, cand)]
    if any(v is not None and not isinstance(v, dict) for v in (base, cand)):     # a mapping against a value
        return [(key, base, cand)]
    b, c = base or {}, cand or {}
    return [d for k in sorted(set(b) | set(c), key=str) for d in _flat(f"{key}.{k}", b.get(k), c.get(k))]


def parse_allow(spec: str | None) -> frozenset[str]:
    allowed = frozenset(s.strip() for s in (spec or "").split(",") if s.strip())
    unknown = sorted(allowed - set(CATEGORIES))
    if unknown:
        raise UsageError(f"--allow-different: unknown {', '.join(unknown)}; use a comma list of "
                         f"{', '.join(CATEGORIES)}")
    return allowed


def _config(report: Report) -> BenchRunConfig:
    return report.bench.config if report.bench is not None else BenchRunConfig()


def _workload(base: BenchRunConfig, cand: BenchRunConfig) -> list[Difference]:
    out = []
    for key in sorted(f.name for f in dataclasses.fields(BenchRunConfig)):
        if key in NOT_WORKLOAD:
            continue
        b, c = to_dict(getattr(base, key)), to_dict(getattr(cand, key))   # a record as its JSON object
        if key == "input_len" and (isinstance(b, list) or isinstance(c, list)):
            continue                  # an --input-len sweep: its lengths are levels, matched one by one
        out += [Difference("workload", field, fb, fc) for field, fb, fc in _flat(key, b, c)]
    return out


def _gpus(report: Report) -> str:
    gpus = report.host.gpus
    if not gpus:
        return f"no GPU ({report.host.cpu_model or 'unknown CPU'}, {report.host.num_cpus or '?'} CPUs)"
    names = sorted({g.name for g in gpus})
    return f"{len(gpus)}x {' + '.join(names)}"


def _flags(cfg: BenchRunConfig) -> dict[str, Any]:
    return {k: getattr(cfg, k) for k in SERVER_KEYS}


def differences(base: Report, cand: Report) -> list[Difference]:
    """Every difference between the two reports that comparability cares about, blocking ones first."""
    bc, cc = _config(base), _config(cand)
    diffs = _workload(bc, cc)
    if base.target.model != cand.target.model:
        diffs.append(Difference("model", "model", base.target.model, cand.target.model))
    for key in ("engine", "engine_version"):
        b, c = getattr(base.target, key), getattr(cand.target, key)
        if b != c:
            diffs.append(Difference("engine", key, b, c))
    bf, cf = _flags(bc), _flags(cc)
    for key in sorted(set(bf) | set(cf)):
        if bf.get(key) != cf.get(key):
            diffs.append(Difference("server_flags", key, bf.get(key), cf.get(key)))
    if _gpus(base) != _gpus(cand):
        diffs.append(Difference("hardware", "gpus", _gpus(base), _gpus(cand)))
    return diffs


def check_comparable(base: Report, cand: Report, allow: frozenset[str] = frozenset()) -> list[Difference]:
    """The differences to list as "what changed"; raises ReportError (exit 2) on a blocking one not allowed."""
    if base.bench is None or cand.bench is None:
        raise ReportError("a bench report without a bench section cannot be compared")
    diffs = differences(base, cand)
    refused = [d for d in diffs if d.category in BLOCKING and d.category not in allow]
    if refused:
        cats = sorted({d.category for d in refused})
        what = "".join(f"\n  {d.describe()}" for d in refused)
        raise ReportError(f"the reports measure a different {' and '.join(cats)}; compare like with like, or pass "
                          f"--allow-different {','.join(cats)} if this is intended (base → candidate):{what}")
    return diffs
