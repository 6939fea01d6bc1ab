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
from typing import Any

import triage.core.engine_truth as engine_truth
from triage.core.probe_data import ServerConfigData
from triage.core.redact import redact_argv
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.probes.http import HttpFailure, HttpGet, base_url, http_get
from triage.probes.prom import normalise, parse_metrics
from triage.probes.registry import ProbeRun, register

FIELDS = ("model", "max_model_len", "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
          "enable_chunked_prefill", "enable_prefix_caching", "kv_cache_dtype", "dtype", "quantization",
          "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enforce_eager",
          "speculative_config", "block_size", "api_server_count", "swap_space_gib")

# flag -> (field, kind). kind: int, float, str, bool (present = True), nobool (present = False), json.
_VLLM_FLAGS = {
    "--model": ("model", "str"), "--max-model-len": ("max_model_len", "int"),
    "--gpu-memory-utilization": ("gpu_memory_utilization", "float"), "--max-num-seqs": ("max_num_seqs", "int"),
    "--max-num-batched-tokens": ("max_num_batched_tokens", "int"),
    "--enable-chunked-prefill": ("enable_chunked_prefill", "bool"),
    "--no-enable-chunked-prefill": ("enable_chunked_prefill", "nobool"),
    "--enable-prefix-caching": ("enable_prefix_caching", "bool"),
    "--no-enable-prefix-caching": ("enable_prefix_caching", "nobool"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--dtype": ("dtype", "str"),
    "--quantization": ("quantization", "str"), "-q": ("quantization", "str"),
    "--tensor-parallel-size": ("tensor_parallel_size", "int"), "-tp": ("tensor_parallel_size", "int"),
    "--pipeline-parallel-size": ("pipeline_parallel_size", "int"), "-pp": ("pipeline_parallel_size", "int"),
    "--data-parallel-size": ("data_parallel_size", "int"), "-dp": ("data_parallel_size", "int"),
    "--enforce-eager": ("enforce_eager", "bool"), "--speculative-config": ("speculative_config", "json"),
    "--block-size": ("block_size", "int"), "--api-server-count": ("api_server_count", "int"),
    "--swap-space": ("swap_space_gib", "float"),
}
_SGLANG_FLAGS = {
    "--model-path": ("model", "str"), "--model": ("model", "str"),
    "--context-length": ("max_model_len", "int"), "--mem-fraction-static": ("gpu_memory_utilization", "float"),
    "--max-running-requests": ("max_num_seqs", "int"), "--chunked-prefill-size": ("max_num_batched_tokens", "int"),
    "--disable-radix-cache": ("enable_prefix_caching", "nobool"), "--kv-cache-dtype": ("kv_cache_dtype", "str"),
    "--dtype": ("dtype", "str"), "--quantization": ("quantization", "str"),
    "--tp-size": ("tensor_parallel_size", "int"), "--tensor-parallel-size": ("tensor_parallel_size", "int"),
    "--pp-size": ("pipeline_parallel_size", "int"), "--dp-size": ("data_parallel_size", "int"),
    "--disable-cuda-graph": ("enforce_eager", "bool"), "--speculative-algorithm": ("speculative_config", "str"),
    "--page-size": ("block_size", "int"),
    # Newer ServerArgs (sglang/srt/arg_groups/fields/exec_.py) turn decode CUDA graphs off with these.
    "--disable-decode-cuda-graph": ("enforce_eager", "bool"),
    "--cuda-graph-backend-decode": ("enforce_eager", "eager_if_disabled"),
}
_TGI_FLAGS = {
    "--model-id": ("model", "str"), "--max-total-tokens": ("max_model_len", "int"),
    "--max-batch-size": ("max_num_seqs", "int"), "--cuda-memory-fraction": ("gpu_memory_utilization", "float"),
    "--max-batch-total-tokens": ("max_batch_total_tokens", "int"),
    "--max-batch-prefill-tokens": ("max_num_batched_tokens", "int"), "--quantize": ("quantization", "str"),
    "--max-concurrent-requests": ("max_concurrent_requests", "int"),
    "--num-shard": ("tensor_parallel_size", "int"), "--dtype": ("dtype", "str"),
    "--kv-cache-dtype": ("kv_cache_dtype", "str"), "--speculate": ("speculative_config", "str"),
}
FLAG_TABLES = {"vllm": _VLLM_FLAGS, "reference": _VLLM_FLAGS, "sglang": _SGLANG_FLAGS, "tgi": _TGI_FLAGS}


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


FLAG_TABLES = {e: _with_aliases("vllm" if e == "reference" else e, t) for e, t in FLAG_TABLES.items()}
# TGI reads each launcher flag from the environment too (clap `env`): MAX_BATCH_SIZE=64 == --max-batch-size 64.
_TGI_ENV = {env: flag for flag in _TGI_FLAGS
            for env in (engine_truth.flag("tgi", flag).env if engine_truth.flag("tgi", flag) else ())}

# Defaults that have held across releases; version-dependent ones come from the truth tables
# (`_versioned_defaults`): vLLM's gpu_memory_utilization is 0.9 up to 0.18 and 0.92 from 0.31 on.
_DEFAULTS = {
    "vllm": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1,
             "data_parallel_size": 1, "enforce_eager": False, "kv_cache_dtype": "auto", "dtype": "auto",
             "quantization": None, "speculative_config": None},
    "sglang": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 1,
               "enforce_eager": False, "kv_cache_dtype": "auto", "dtype": "auto", "enable_prefix_caching": True},
    "tgi": {"tensor_parallel_size": 1},
}
_VERSIONED = {"vllm": ("gpu_memory_utilization",), "tgi": ("gpu_memory_utilization",)}


def _versioned_defaults(engine: str, version: str | None) -> tuple[dict[str, Any], str]:
    """Defaults read from the engine's own source at that version (the newest table when unknown)."""
    t = engine_truth.table(engine, version)
    if t is None:
        return {}, "default"
    values = {k: t.defaults.get(k) for k in _VERSIONED.get(engine, ()) if t.defaults.get(k) is not None}
    return values, f"default ({t.label})"
# vLLM V1 (what the `engine` label in /metrics reveals) turned both on by default.
_VLLM_V1_DEFAULTS = {"enable_chunked_prefill": True, "enable_prefix_caching": True}

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
    table = FLAG_TABLES.get(engine, _VLLM_FLAGS)
    out: dict[str, Any] = {}
    bad: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, inline = arg.partition("=")
        flag_norm = flag if flag in table else flag.replace("_", "-")
        if flag_norm in table:
            field, kind = table[flag_norm]
            raw: str | None = inline if eq else None
            takes_value = kind not in ("bool", "nobool")
            if kind == "bool" and not eq and i + 1 < len(args) and args[i + 1].lower() in ("true", "false"):
                raw = args[i + 1]  # SGLang/TGI style `--flag true`
                i += 1
            if takes_value and not eq:
                raw = args[i + 1] if i + 1 < len(args) else None
                i += 1
            try:
                out[field] = _convert(kind, raw)
            except ValueError:
                bad.append(flag_norm)
        i += 1
    if engine in ("vllm", "reference") and "model" not in out:
        # `vllm serve MODEL ...`: the positional after `serve`.
        for j, arg in enumerate(args[:-1]):
            if arg == "serve" and not args[j + 1].startswith("-"):
                out["model"] = args[j + 1]
                break
    if engine in ("vllm", "reference") and "--config" in args[:-1]:
        _merge_yaml_config(args[args.index("--config") + 1], table, out, bad)
    if engine == "sglang" and "max_num_batched_tokens" in out:
        # --chunked-prefill-size -1 turns chunking off; it is then no token budget at all.
        out["enable_chunked_prefill"] = out["max_num_batched_tokens"] > 0
        if not out["enable_chunked_prefill"]:
            del out["max_num_batched_tokens"]
    return out, bad


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
    if engine == "tgi":
        for name, flag in _TGI_ENV.items():
            if name in env and flag in _TGI_FLAGS:
                field, kind = _TGI_FLAGS[flag]
                try:
                    out[field] = _convert(kind, env[name])
                except ValueError:
                    continue
        if env.get("PREFIX_CACHING") in ("0", "false"):
            out["enable_prefix_caching"] = False
    return out


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


def probe_server_config(url: str | None, cmdline: Sequence[str] | None = None, engine: str | None = None,
                        metrics_engine: str | None = None, get: HttpGet = http_get,
                        timeout_s: float = 3.0, environ: dict[str, str] | None = None) -> ProbeResult:
    """`cmdline`: the server's argv (redacted here again); `engine`: from the process (vllm|sglang|tgi|reference)."""
    start = time.perf_counter()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []

    def put(field: str, value: Any, source: str) -> None:
        if field not in sources and value is not None:
            values[field] = value
            sources[field] = source

    base = base_url(url) if url else None
    cache_config: dict[str, Any] = {}
    if base:
        raw = None
        try:
            resp = get(base + "/metrics", timeout_s)
            raw = resp.text if resp.status_code == 200 else None
        except HttpFailure as e:
            notes.append(str(e))
        if raw:
            m = normalise(parse_metrics(raw))
            metrics_engine = metrics_engine or m.engine
            cache_config = dict(m.cache_config)
        for label, field in _CACHE_CONFIG_MAP.items():
            put(field, cache_config.get(label), "cache_config_info")
        models = _get_json(get, base + "/v1/models", timeout_s)
        if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
            first = models["data"][0]
            if isinstance(first, dict):
                put("max_model_len", first.get("max_model_len"), "/v1/models")
                put("model", first.get("root") or first.get("id"), "/v1/models")
                put("served_model_name", first.get("id"), "/v1/models")
        version = _get_json(get, base + "/version", timeout_s)
        if isinstance(version, dict) and version.get("version"):
            put("engine_version", str(version["version"]), "/version")
            if engine is None and str(version.get("engine", "")).startswith("triage"):
                engine = "reference"  # our own `triage serve` names itself there
        info = _get_json(get, base + "/info", timeout_s)  # TGI
        if isinstance(info, dict) and info.get("model_id"):
            engine = engine or "tgi"
            put("engine_version", info.get("version"), "/info")
            put("model", info.get("model_id"), "/info")
            put("max_model_len", info.get("max_total_tokens"), "/info")
            # max_concurrent_requests is TGI's refusal limit (claim tgi.max-concurrent-requests-refuses), not
            # its batch size: /info has none, and TGI 3.x bounds its batch by tokens.
            put("max_concurrent_requests", info.get("max_concurrent_requests"), "/info")
    argv = redact_argv(cmdline) if cmdline else None
    if engine is None and metrics_engine:
        engine = "vllm" if metrics_engine.startswith("vllm") else metrics_engine
    bad_flags: list[str] = []
    if argv:
        parsed, bad_flags = parse_flags(argv, engine or "vllm")
        for field, value in parsed.items():
            put(field, value, "cmdline")
    if environ and engine:
        for field, value in parse_env(environ, engine).items():
            put(field, value, "environment")
    for field, value in _DEFAULTS.get("vllm" if engine == "reference" else engine or "", {}).items():
        if field not in sources:
            values[field] = value
            sources[field] = "default"
    if engine in _VERSIONED:
        versioned, label = _versioned_defaults(engine, values.get("engine_version"))
        for field, value in versioned.items():
            put(field, value, label)
    if metrics_engine == "vllm":
        for field, value in _VLLM_V1_DEFAULTS.items():
            put(field, value, "default")
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
