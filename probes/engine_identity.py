"""Which engine serves this URL, and which version: from the command line when the process is local,
and from what the server itself says over HTTP (its Server header, /version, /api/version, /props,
/openapi.json, /v1/models and its metric names). Every signal comes from the engine's own source;
see the identity of each engine module in triage/engines/.

`identify()` is pure: it takes the answers already fetched. `fetch_signals()` does the GETs, each
bounded, and a path the server does not have is simply absent.
"""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from triage.core.probe_data import EngineIdentityData
from triage.core.snapshot import ProbeResult, ProbeStatus
from triage.engines import engines
from triage.engines import get as engine_by_name
from triage.probes.http import DEFAULT_TIMEOUT_S, HttpFailure, HttpGet, HttpResponse, base_url, http_get
from triage.probes.registry import ProbeRun, register

PATHS = ("/version", "/api/version", "/props", "/openapi.json", "/v1/models", "/info")


@dataclass(frozen=True, slots=True)
class EngineIdentity:
    engine: str | None                 # an ENGINES key, or None when nothing identified it
    version: str | None = None
    evidence: tuple[str, ...] = ()     # what said so, in words ("Server: llama.cpp", ...)


@dataclass(frozen=True, slots=True)
class HttpSignals:
    """The server's answers: path -> parsed JSON (2xx only), plus the response headers seen."""

    json_by_path: Mapping[str, Any] = field(default_factory=dict)
    server_header: str | None = None


def _json(resp: HttpResponse) -> Any:
    if not 200 <= resp.status_code < 300:
        return None
    try:
        return json.loads(resp.text)
    except (ValueError, RecursionError):
        return None


def fetch_signals(url: str, get: HttpGet = http_get, timeout_s: float = DEFAULT_TIMEOUT_S) -> HttpSignals:
    """GET each identity path once; failures and non-JSON answers are left out, never raised."""
    base = base_url(url)
    found: dict[str, Any] = {}
    server: str | None = None
    for path in PATHS:
        try:
            resp = get(base + path, timeout_s)
        except HttpFailure:
            continue
        server = server or resp.headers.get("server")
        body = _json(resp)
        if body is not None:
            found[path] = body
    return HttpSignals(found, server)


def _version_of(body: Any) -> str | None:
    if isinstance(body, Mapping) and isinstance(body.get("version"), (str, int, float)):
        return str(body["version"])[:64]
    return None


def _from_http(sig: HttpSignals) -> list[tuple[str, str | None, str]]:
    """(engine, version, evidence) for every HTTP signal that names one engine (each engine module declares
    its own: Server header, JSON endpoints, /openapi.json routes, /v1/models owned_by)."""
    out: list[tuple[str, str | None, str]] = []
    by_path = sig.json_by_path
    for eng in engines():
        if eng.identity.server_header and sig.server_header == eng.identity.server_header:
            out.append((eng.name, None, f"Server: {sig.server_header}"))
    for eng in engines():
        for signal in eng.identity.endpoints:
            body = by_path.get(signal.path)
            if signal.matches(body):
                raw = body.get(signal.version_key) if signal.version_key else None
                out.append((eng.name, str(raw)[:64] if raw not in (None, "") else None, signal.what))
    openapi = by_path.get("/openapi.json")
    paths = set(openapi.get("paths", {})) if isinstance(openapi, Mapping) and isinstance(
        openapi.get("paths"), Mapping) else set()
    for eng in engines():
        hit = paths.intersection(eng.identity.openapi_paths)
        if hit:
            out.append((eng.name, None, f"/openapi.json serves {sorted(hit)[0]}"))
    models = by_path.get("/v1/models")
    data = models.get("data") if isinstance(models, Mapping) else None
    owners = {str(m.get("owned_by")) for m in data if isinstance(m, Mapping)} if isinstance(data, list) else set()
    for eng in engines():
        if eng.identity.owned_by and eng.identity.owned_by in owners:
            out.append((eng.name, None, f"/v1/models owned_by={eng.identity.owned_by}"))
    return out


def _from_metrics(metric_names: Iterable[str]) -> list[tuple[str, str | None, str]]:
    names = list(metric_names)
    out = []
    for eng in engines():
        for prefix in eng.identity.metric_prefixes:
            if any(n.startswith(prefix) for n in names):
                out.append((eng.name, None, f"/metrics has {prefix}* names"))
                break
    return out


def describe(sig: HttpSignals) -> str | None:
    """What a server says of itself, in words: its Server header, /v1/models owned_by, /version's version."""
    bits = [f"Server: {sig.server_header}"] if sig.server_header else []
    models = sig.json_by_path.get("/v1/models")
    data = models.get("data") if isinstance(models, Mapping) else None
    owners = sorted({str(m["owned_by"]) for m in data if isinstance(m, Mapping) and m.get("owned_by")}) \
        if isinstance(data, list) else []
    bits += [f"owned_by {o}" for o in owners[:3]]
    version = _version_of(sig.json_by_path.get("/version"))
    if version:
        bits.append(f"/version {version}")
    return "; ".join(bits) or None


def identify(cmdline_engine: str | None = None, http: HttpSignals | None = None,
             metric_names: Iterable[str] = ()) -> EngineIdentity:
    """The engine the signals agree on. The command line wins (it is what was launched); then the
    most specific HTTP signal; then metric names. Versions come from whichever signal carries one."""
    found = _from_http(http) if http is not None else []
    found += _from_metrics(metric_names)
    if cmdline_engine and cmdline_engine != "unknown":
        found.insert(0, (cmdline_engine, None, f"command line launches {cmdline_engine}"))
    if not found:
        return EngineIdentity(None)
    engine = found[0][0]
    # An engine that exports another's metric names on purpose (the reference engine: vLLM's) is told apart
    # by its own signal.
    for e, _, _ in found:
        module = engine_by_name(e)
        if module is not None and module.identity.exports_metrics_of == engine:
            engine = e
            break
    version = next((v for e, v, _ in found if e == engine and v), None)
    module = engine_by_name(engine)
    if version is None and http is not None and module is not None and module.identity.version_path:
        version = _version_of(http.json_by_path.get(module.identity.version_path))
    evidence = tuple(dict.fromkeys(ev for e, _, ev in found if e == engine))
    return EngineIdentity(engine, version, evidence)


def probe_engine_identity(url: str | None, cmdline_engine: str | None = None, argv: list[str] | None = None,
                          env: Mapping[str, str] | None = None, get: HttpGet = http_get) -> ProbeResult:
    """The `engine_identity` probe: which engine, which version, on what evidence; for llama.cpp its
    slots (/props, /slots); and the batching settings its command line and environment give."""
    from triage.probes.batching_config import read_batching
    from triage.probes.llamacpp import read_slots
    from triage.probes.prom import parse_metrics

    start = time.perf_counter()
    if url is None and cmdline_engine is None:
        return ProbeResult("engine_identity", ProbeStatus.UNSUPPORTED, 0.0, "no server to identify")
    signals = fetch_signals(url, get) if url else HttpSignals()
    names: set[str] = set()
    if url:
        try:
            resp = get(base_url(url) + "/metrics", DEFAULT_TIMEOUT_S)
            if 200 <= resp.status_code < 300:
                names = parse_metrics(resp.text).names()
        except HttpFailure:
            pass
    who = identify(cmdline_engine, signals, names)
    data: dict[str, Any] = {"engine": who.engine, "version": who.version, "evidence": list(who.evidence),
                            "server_header": signals.server_header, "says": describe(signals)}
    batching = read_batching(who.engine, argv or [], env or {})
    data["batching"] = {"slots": batching.slots, "continuous": batching.continuous,
                        "ctx_tokens": batching.ctx_tokens, "max_queue": batching.max_queue,
                        "evidence": list(batching.evidence), "from_cmdline": argv is not None}
    module = engine_by_name(who.engine)
    if module is not None and module.identity.has_slots and url:
        slots = read_slots(url, get)
        if slots is not None:
            data["llamacpp"] = {"total_slots": slots.total_slots, "busy_slots": slots.busy_slots,
                                "ctx_per_slot_tokens": slots.ctx_per_slot_tokens, "build_info": slots.build_info,
                                "model_path": slots.model_path}
    reason = None if who.engine else "no command line, header, endpoint or metric name identified the engine"
    return ProbeResult("engine_identity", ProbeStatus.OK, time.perf_counter() - start, reason,
                       EngineIdentityData.build(data))


@register("engine_identity", phase=1, order=15, timeout_s=lambda run: run.grace_s + len(PATHS) * DEFAULT_TIMEOUT_S)
def _run(run: ProbeRun) -> ProbeResult:
    return probe_engine_identity(run.url, run.engine, list(run.argv) if run.argv is not None else None, run.env)
