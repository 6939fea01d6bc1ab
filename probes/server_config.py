"""The `server_config` probe: the serving engine's effective configuration, from where it can be seen.

Sources, most authoritative first: the `cache_config_info` metric labels and `/v1/models` (what the
running engine reports), the process command line (what was asked), `/version`, then engine defaults
that have been stable across versions. `sources` says where each value came from. Secrets in the
command line are redacted before anything is kept. Keys: docs/SNAPSHOT.md, section `server_config`.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

import triage.engines.truth as engine_truth
from triage.core.probe_data import ServerConfigData
from triage.core.redact import redact_argv
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.engines import assumed, engines
from triage.engines import get as engine_by_name
from triage.engines import normalise as normalise_engine
from triage.probes.http import HttpFailure, HttpGet, base_url, http_get
from triage.probes.prom import normalise, parse_metrics
from triage.probes.registry import ProbeRun, register

FIELDS = ("model", "max_model_len", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
          "max_batch_total_tokens", "max_concurrent_requests",
          "enable_chunked_prefill", "enable_prefix_caching", "kv_cache_dtype", "dtype", "quantization",
          "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enforce_eager",
          "speculative_config", "block_size", "api_server_count", "swap_space_gib",
          "dp_load_balance", "dp_attention", "expert_parallel", "expert_parallel_size", "enable_eplb",
          "disaggregation_role", "kv_connector", "kv_offload", "kv_offload_size_gib")


def _config_module(engine: str | None):
    """The engine module whose flags this engine's command takes (the reference engine takes vLLM's), or vLLM's
    for an engine triage does not know (the most common launcher)."""
    module = engine_by_name(engine) or assumed()
    return engine_by_name(module.flags_like) if module is not None and module.flags_like else module


def _with_aliases(engine: str, table: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Add every spelling the engine's own parser accepts (aliases, `--no-` forms; all tabled versions)."""
    out = dict(table)
    for version in engine_truth.versions(engine):
        t = engine_truth.table(engine, version)
        for spelling, canonical in t.spellings().items():  # type: ignore[union-attr]
            if spelling in out or canonical not in table:
                continue
            field, kind = table[canonical]
            if spelling.startswith("--no-") and kind == "bool":
                kind = "nobool"
            out[spelling] = (field, kind)
    return out


@cache
def flag_table(engine: str | None) -> dict[str, tuple[str, str]]:
    """flag -> (field, kind) for the engine's command line, every spelling its versions accept."""
    module = _config_module(engine)
    return _with_aliases(module.name, module.config_flags) if module is not None else {}


@cache
def _env_twins(engine: str) -> dict[str, str]:
    """TGI reads each launcher flag from the environment too (clap `env`): MAX_BATCH_SIZE=64 == --max-batch-size."""
    module = _config_module(engine)
    if module is None or not module.env_twins:
        return {}
    return {env: flag for flag in module.config_flags
            for env in (engine_truth.flag(module.name, flag).env if engine_truth.flag(module.name, flag) else ())}


def _versioned_defaults(engine: str, version: str | None) -> tuple[dict[str, Any], str]:
    """Defaults read from the engine's own source at that version (the newest table when unknown)."""
    module = engine_by_name(engine)
    t = engine_truth.table(engine, version)
    if t is None or module is None:
        return {}, "default"
    values = {k: t.defaults.get(k) for k in module.versioned_defaults if t.defaults.get(k) is not None}
    return values, f"default ({t.label})"


_CACHE_CONFIG_MAP = {"block_size": "block_size", "gpu_memory_utilization": "gpu_memory_utilization",
                     "enable_prefix_caching": "enable_prefix_caching", "cache_dtype": "kv_cache_dtype"}


def parse_human_int(text: str) -> int:
    """'32768', '32k', '1M', '2K' -> int (vLLM accepts k/K/m/M suffixes for lengths)."""
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not m:
        raise ValueError(text)
    number, suffix = float(m.group(1)), m.group(2)
    scale = {"": 1, "k": 1000, "K": 1024, "m": 10**6, "M": 2**20, "g": 10**9, "G": 2**30}[suffix]
    return int(number * scale)


def _convert(kind: str, raw: str | None) -> Any:
    if kind == "eager_if_disabled":
        return raw is not None and raw.strip().lower() == "disabled"
    if kind == "bool":
        return True if raw is None else raw.strip().lower() not in ("false", "0", "no")
    if kind == "nobool":
        return False
    if raw is None:
        raise ValueError("missing value")
    if kind == "int":
        return parse_human_int(raw)
    if kind == "float":
        return float(raw)
    if kind == "json":
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def parse_flags(argv: Sequence[str], engine: str) -> tuple[dict[str, Any], list[str]]:
    """(typed config from the flags, flags whose value could not be parsed). argv is already redacted."""
    table = flag_table(engine)
    out: dict[str, Any] = {}
    bad: list[str] = []
    args = [_unabbreviated(a, engine, table) for a in argv]
    i = 0
    while i < len(args):
        i = _read_flag(args, i, table, out, bad) + 1
    module = _config_module(engine)
    if module is not None:
        _module_extras(module, args, table, out, bad)
    return out, bad


def _unabbreviated(arg: str, engine: str, table: dict[str, tuple[str, str]]) -> str:
    """`--tp=2` -> `--tp-size=2` for an engine whose parser takes a unique prefix of a flag (argparse's
    allow_abbrev, SGLang's): only when exactly one flag of its newest table starts with it."""
    flag, eq, value = arg.partition("=")
    module = engine_by_name(engine)
    if not flag.startswith("--") or flag in table or module is None or not module.abbreviated_flags:
        return arg
    t = engine_truth.table(module.name)
    spellings = t.spellings() if t is not None else {}
    matches = {canonical for spelling, canonical in spellings.items() if spelling.startswith(flag)}
    return (matches.pop() + eq + value) if len(matches) == 1 else arg


def _read_flag(args: list[str], i: int, table: dict[str, tuple[str, str]], out: dict[str, Any],
               bad: list[str]) -> int:
    """Read args[i] into `out` when it is a known flag (its value too); the index of the last arg it used."""
    flag, eq, inline = args[i].partition("=")
    flag_norm = flag if flag in table else flag.replace("_", "-")
    if flag_norm not in table:
        return i
    field, kind = table[flag_norm]
    raw: str | None = inline if eq else None
    if kind == "bool" and not eq and i + 1 < len(args) and args[i + 1].lower() in ("true", "false"):
        raw = args[i + 1]  # SGLang/TGI style `--flag true`
        i += 1
    if kind not in ("bool", "nobool") and not eq:
        raw = args[i + 1] if i + 1 < len(args) else None
        i += 1
    try:
        out[field] = _convert(kind, raw)
    except ValueError:
        bad.append(flag_norm)
    return i


def _module_extras(module: Any, args: list[str], table: dict[str, tuple[str, str]], out: dict[str, Any],
                   bad: list[str]) -> None:
    """What the engine's command line says beyond its flags: the positional model, a --config file."""
    if module.model_after and "model" not in out:
        # `vllm serve MODEL ...`: the positional after `serve`.
        for j, arg in enumerate(args[:-1]):
            if arg == module.model_after and not args[j + 1].startswith("-"):
                out["model"] = args[j + 1]
                break
    if module.config_file_flag and module.config_file_flag in args[:-1]:
        _merge_yaml_config(args[args.index(module.config_file_flag) + 1], table, out, bad)
    if module.config_fixup_fn is not None:
        module.config_fixup_fn(out)


def _merge_yaml_config(path: str, table: dict[str, tuple[str, str]], out: dict[str, Any], bad: list[str]) -> None:
    """vLLM's `--config file.yaml`: keys are flag names without dashes; the command line wins."""
    try:
        import yaml
    except ImportError:
        bad.append("--config (PyYAML is not installed)")
        return
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as e:
        bad.append(f"--config ({type(e).__name__})")
        return
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        flag = "--" + str(key).replace("_", "-")
        if flag not in table:
            continue
        field, kind = table[flag]
        if field in out:
            continue
        try:
            out[field] = _convert(kind, None if kind in ("bool", "nobool") and value is True else str(value)) \
                if not (kind == "bool" and value is False) else False
        except ValueError:
            bad.append(flag)


def parse_env(env: dict[str, str], engine: str) -> dict[str, Any]:
    """Settings an engine takes from the environment: TGI's clap `env` twins of its flags."""
    out: dict[str, Any] = {}
    module = _config_module(engine)
    twins = _env_twins(engine)
    for name, flag in twins.items():
        if name in env and module is not None and flag in module.config_flags:
            field, kind = module.config_flags[flag]
            try:
                out[field] = _convert(kind, env[name])
            except ValueError:
                continue
    # The launcher's switches that are environment variables only (TGI's PREFIX_CACHING)
    own = engine_by_name(engine)
    for field, names in (own.env_off_switches if own is not None else {}).items():
        if any(env.get(name) in ("0", "false") for name in names):
            out[field] = False
    return out


def _named_by(path: str, body: Any) -> str | None:
    """The engine whose own endpoint signal this answer is (the reference engine's /version), or None."""
    return next((m.name for m in engines() for s in m.identity.endpoints if s.path == path and s.matches(body)), None)


def _get_json(get: HttpGet, url: str, timeout_s: float) -> Any:
    try:
        resp = get(url, timeout_s)
    except HttpFailure:
        return None
    if resp.status_code != 200:
        return None
    try:
        return json.loads(resp.text)
    except json.JSONDecodeError:
        return None


class _Settings:
    """Each setting with the first source that gave it (endpoints, then the command line, then defaults)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}

    def put(self, field: str, value: Any, source: str) -> None:
        if field not in self.sources and value is not None:
            self.values[field] = value
            self.sources[field] = source

    def put_all(self, values: dict[str, Any], source: str) -> None:
        for field, value in values.items():
            self.put(field, value, source)


def _from_metrics(base: str, get: HttpGet, timeout_s: float, notes: list[str]) -> tuple[str | None, dict[str, Any]]:
    """(the engine the /metrics names imply, its cache_config_info labels)."""
    raw = None
    try:
        resp = get(base + "/metrics", timeout_s)
        raw = resp.text if resp.status_code == 200 else None
    except HttpFailure as e:
        notes.append(str(e))
    if not raw:
        return None, {}
    m = normalise(parse_metrics(raw))
    return m.engine, dict(m.cache_config)


def _from_models(models: Any, settings: _Settings) -> None:
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        if isinstance(first, dict):
            settings.put("max_model_len", first.get("max_model_len"), "/v1/models")
            settings.put("model", first.get("root") or first.get("id"), "/v1/models")
            settings.put("served_model_name", first.get("id"), "/v1/models")


def _from_engine_endpoints(base: str, get: HttpGet, timeout_s: float, engine: str | None,
                           settings: _Settings) -> str | None:
    """Settings an engine's own endpoint reports (TGI /info); the engine, named by whose endpoint answered."""
    for module in engines():
        for path, keys in module.config_endpoints.items():
            body = _get_json(get, base + path, timeout_s)
            if not any(s.path == path and s.matches(body) for s in module.identity.endpoints):
                continue
            engine = engine or module.name
            for key, field in keys.items():
                settings.put(field, body.get(key), path)
    return engine


def _from_endpoints(base: str, get: HttpGet, timeout_s: float, engine: str | None, metrics_engine: str | None,
                    settings: _Settings, notes: list[str]) -> tuple[str | None, str | None, dict[str, Any]]:
    """(engine, metrics engine, cache_config) from what the server's endpoints answer."""
    named, cache_config = _from_metrics(base, get, timeout_s, notes)
    metrics_engine = metrics_engine or named
    for label, field in _CACHE_CONFIG_MAP.items():
        settings.put(field, cache_config.get(label), "cache_config_info")
    _from_models(_get_json(get, base + "/v1/models", timeout_s), settings)
    version = _get_json(get, base + "/version", timeout_s)
    if isinstance(version, dict) and version.get("version"):
        settings.put("engine_version", str(version["version"]), "/version")
    engine = engine or _named_by("/version", version)   # our own `triage serve` names itself there
    return _from_engine_endpoints(base, get, timeout_s, engine, settings), metrics_engine, cache_config


def _defaults(engine: str | None, metrics_engine: str | None, settings: _Settings) -> None:
    """The engine's defaults (its config module's, then the version's), and those its metric names imply."""
    config_module = _config_module(engine) if engine else None
    for field, value in (config_module.config_defaults if config_module is not None else {}).items():
        if field not in settings.sources:
            settings.values[field] = value
            settings.sources[field] = "default"
    if engine:
        versioned, label = _versioned_defaults(engine, settings.values.get("engine_version"))
        settings.put_all(versioned, label)
    implied = next((m.metrics_defaults[metrics_engine] for m in engines() if metrics_engine in m.metrics_defaults), {})
    settings.put_all(implied, "default")


def probe_server_config(url: str | None, cmdline: Sequence[str] | None = None, engine: str | None = None,
                        metrics_engine: str | None = None, get: HttpGet = http_get,
                        timeout_s: float = 3.0, environ: dict[str, str] | None = None) -> ProbeResult:
    """`cmdline`: the server's argv (redacted here again); `engine`: from the process (vllm|sglang|tgi|reference)."""
    start = time.perf_counter()
    settings = _Settings()
    notes: list[str] = []
    base = base_url(url) if url else None
    cache_config: dict[str, Any] = {}
    if base:
        engine, metrics_engine, cache_config = _from_endpoints(base, get, timeout_s, engine, metrics_engine,
                                                               settings, notes)
    argv = redact_argv(cmdline) if cmdline else None
    if engine is None and metrics_engine:
        engine = normalise_engine(metrics_engine)
    bad_flags: list[str] = []
    if argv:
        parsed, bad_flags = parse_flags(argv, engine or assumed().name)
        settings.put_all(parsed, "cmdline")
    if environ and engine:
        settings.put_all(parse_env(environ, engine), "environment")
    _defaults(engine, metrics_engine, settings)
    values, sources = settings.values, settings.sources
    data: dict[str, Any] = {"engine": engine, "engine_version": values.pop("engine_version", None)}
    for field in FIELDS:
        data[field] = values.get(field)
    data["served_model_name"] = values.get("served_model_name")
    data["metrics_engine"] = metrics_engine
    data["cache_config"] = cache_config
    data["sources"] = sources
    data["unparsed_flags"] = bad_flags
    duration = time.perf_counter() - start
    if not argv and not sources:
        reason = "no server command line and no answer from the server's endpoints"
        if notes:
            reason += f" ({notes[0]})"
        return ProbeResult("server_config", ProbeStatus.UNSUPPORTED, duration, reason, ServerConfigData.of(data))
    return ProbeResult("server_config", ProbeStatus.OK, duration, None, ServerConfigData.of(data))


@register("server_config", phase=1, order=10, timeout_s=lambda run: run.grace_s)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_server_config(run.url, run.argv, run.engine, environ=dict(run.env) if run.env else None)
