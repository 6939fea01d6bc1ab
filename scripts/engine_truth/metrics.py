"""Prometheus metric names an engine declares, with their kind."""
from __future__ import annotations

import ast
import re

from .ast_util import call_name
from .symbols import Symbols

METRIC_CLASSES = {"gauge": "gauge", "counter": "counter", "histogram": "histogram", "summary": "summary"}
_METRIC_NAME = re.compile(r"^[a-z_]+:[a-z0-9_]+$")


def extract_metrics(sym: Symbols, rels: list[str], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for rel in rels:
        tree = sym.trees.get(rel)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fname = call_name(node).lower().strip("_")
            kind = next((k for k in METRIC_CLASSES if k in fname), None)
            if kind is None:
                continue
            name_node = next((kw.value for kw in node.keywords if kw.arg == "name"), None)
            if name_node is None and node.args:
                name_node = node.args[0]
            if isinstance(name_node, ast.Constant) and isinstance(name_node.value, str) \
                    and name_node.value.startswith(prefix):
                out.setdefault(name_node.value, kind)
        for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for name, kind in _indirect_metrics(fn, prefix):
                out.setdefault(name, kind)
    return dict(sorted(out.items()))


def _indirect_metrics(fn: ast.AST, prefix: str) -> list[tuple[str, str]]:
    """Names built apart from the metric's constructor inside one function: `name = "vllm:cache_config_info"`
    then `Gauge(name=name, ...)`, or a list of `("vllm:spec_decode_num_drafts", doc)` pairs turned into
    counters in a loop (vLLM >= 0.11). The kind is the one metric class the function constructs."""
    kinds = {k for call in ast.walk(fn) if isinstance(call, ast.Call)
             for k in METRIC_CLASSES if k in call_name(call).lower()}
    if len(kinds) != 1:
        return []
    names = []
    for node in ast.walk(fn):
        value = None
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "name" for t in node.targets):
            value = node.value
        elif isinstance(node, ast.Tuple) and node.elts:
            value = node.elts[0]
        if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.startswith(prefix) \
                and _METRIC_NAME.match(value.value):
            names.append((value.value, next(iter(kinds))))
    return names
