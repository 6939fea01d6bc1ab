"""The dotted-path builders some older tests still call (tests/test_rules_engine.py, test_engines.py,
test_healthy_corpus.py, test_engine_defects.py): the typed healthy snapshot and bench as plain JSON,
changed by dotted path ("gpu.gpus.0.utilization_gpu_pct"). New rule cases use _build.py's typed edits."""
from __future__ import annotations

import copy
from typing import Any

from tests.rule_cases._healthy import healthy_bench
from tests.rule_cases._healthy import healthy_probes as typed_probes
from triage.core.convert import to_dict


def healthy_probes() -> dict[str, dict[str, Any]]:
    """probe name -> data (JSON) for a healthy, moderately loaded vLLM host."""
    return {name: payload.to_dict() for name, payload in typed_probes().items()}


def _set(root: Any, path: str, value: Any) -> None:
    parts = path.split(".")
    node = root
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value


def patched(base: dict[str, Any], patch: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for path, value in (patch or {}).items():
        _set(out, path, value)
    return out


def snapshot(patch: dict[str, Any] | None = None, drop: tuple[str, ...] = (),
             status: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    """The healthy snapshot (JSON) with `patch` applied, probes in `drop` left out, and `status` overrides
    ({probe: (status, reason)}, whose data becomes empty)."""
    data = patched(healthy_probes(), patch)
    probes = []
    for name, body in data.items():
        if name in drop:
            continue
        st, reason = (status or {}).get(name, ("ok", None))
        probes.append({"name": name, "status": st, "duration_s": 0.05, "reason": reason,
                       "data": body if st == "ok" else {}})
    return {"probes": probes}


def bench(patch: dict[str, Any] | None = None, concurrencies=(1, 4, 16, 64)) -> dict[str, Any]:
    return patched(to_dict(healthy_bench(concurrencies)), patch)
