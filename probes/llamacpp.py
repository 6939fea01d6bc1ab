"""llama.cpp's own view of its slots: GET /props (context per slot, number of slots, build) and
GET /slots (which slots are busy). From ggml-org/llama.cpp tools/server/server.cpp and its README:
`/props` carries `total_slots`, `build_info`, `model_alias` and `default_generation_settings.n_ctx`
(the context of one slot: `-c` is split over the `--parallel` slots unless the KV cache is
unified); `/slots` is a list with `is_processing` per slot (only with `--slots`, on by default in
recent builds)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from triage.probes.http import DEFAULT_TIMEOUT_S, HttpFailure, HttpGet, base_url, http_get


@dataclass(frozen=True, slots=True)
class LlamaCppSlots:
    total_slots: int | None = None
    busy_slots: int | None = None           # from /slots; None when the endpoint is off
    ctx_per_slot_tokens: int | None = None
    build_info: str | None = None
    model_alias: str | None = None
    model_path: str | None = None           # the -m argument, as the server reports it


def _int(value: Any, lo: int = 0, hi: int = 10**9) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or not lo <= value <= hi:   # NaN or out of range
        return None
    return int(value)


def parse(props: Any, slots: Any) -> LlamaCppSlots:
    """Total: any JSON shape in, the fields it could read out."""
    total = ctx = None
    build = alias = path = None
    if isinstance(props, Mapping):
        total = _int(props.get("total_slots"), 1, 65536)
        settings = props.get("default_generation_settings")
        if isinstance(settings, Mapping):
            ctx = _int(settings.get("n_ctx"), 1)
        build = str(props["build_info"])[:80] if isinstance(props.get("build_info"), str) else None
        alias = str(props["model_alias"])[:200] if isinstance(props.get("model_alias"), str) else None
        path = str(props["model_path"])[:500] if isinstance(props.get("model_path"), str) else None
    busy = None
    if isinstance(slots, list) and slots and all(isinstance(s, Mapping) for s in slots):
        busy = sum(1 for s in slots if s.get("is_processing") is True)
        total = total or len(slots)
        ctx = ctx or _int(slots[0].get("n_ctx"), 1)
    return LlamaCppSlots(total, busy, ctx, build, alias, path)


def read_slots(url: str, get: HttpGet = http_get, timeout_s: float = DEFAULT_TIMEOUT_S) -> LlamaCppSlots | None:
    """Both endpoints; None when neither answers with JSON (not a llama-server, or both disabled)."""
    bodies: dict[str, Any] = {}
    for path in ("/props", "/slots"):
        try:
            resp = get(base_url(url) + path, timeout_s)
            if 200 <= resp.status_code < 300:
                bodies[path] = json.loads(resp.text)
        except (HttpFailure, ValueError, RecursionError):
            continue
    if not bodies:
        return None
    return parse(bodies.get("/props"), bodies.get("/slots"))
