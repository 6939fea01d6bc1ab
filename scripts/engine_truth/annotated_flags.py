"""SGLang >= 0.5.2x declares flags as dataclass fields `name: A[T, "help" | Arg(...)] = default`
(sglang/srt/arg_groups/arg_utils.py: add_cli_args_from_dataclass)."""
from __future__ import annotations

import ast
from typing import Any

from .ast_util import UNRESOLVED, call_name, dotted, jsonable
from .symbols import Symbols


def add_annotated_flags(sym: Symbols, rels: list[str], flags: dict[str, dict[str, Any]]) -> list[str]:
    """Every annotated field of every class in the given files -> flags; returns unresolved notes."""
    unresolved: list[str] = []
    for rel in rels:
        tree = sym.trees.get(rel)
        if tree is None:
            continue
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for item in cls.body:
                arg = _arg_keywords(item)
                if arg is None or sym.value(arg.get("no_cli")) is True:
                    continue
                field = item.target.id
                cli = sym.value(arg["cli_name"]) if "cli_name" in arg else "--" + field.replace("_", "-")
                spec = _field_spec(sym, cls.name, item, arg)
                if not isinstance(cli, str):
                    unresolved.append(f"{cls.name}.{field}: cli name")
                    continue
                flags.setdefault(cli, spec)
    return unresolved


def _arg_keywords(item: ast.stmt) -> dict[str, ast.expr] | None:
    """`x: A[T, Arg(k=v, ...)]` -> {k: v}; `x: A[T, "help"]` -> {}; None for any other statement."""
    if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            and isinstance(item.annotation, ast.Subscript)
            and dotted(item.annotation.value) in ("A", "Annotated")
            and isinstance(item.annotation.slice, ast.Tuple)):
        return None
    meta = item.annotation.slice.elts[1]
    if isinstance(meta, ast.Call) and call_name(meta) == "Arg":
        return {kw.arg: kw.value for kw in meta.keywords if kw.arg}
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return {}
    return None


def _field_spec(sym: Symbols, cls: str, item: ast.AnnAssign, arg: dict[str, ast.expr]) -> dict[str, Any]:
    raw_type = item.annotation.slice.elts[0]  # type: ignore[attr-defined]
    spec: dict[str, Any] = {"field": f"{cls}.{item.target.id}"}  # type: ignore[attr-defined]
    t = sym.type_of(raw_type)
    if "action" in arg:
        spec["type"] = "str"
        spec["action"] = ast.unparse(arg["action"])[:60]
    elif t == "bool":
        spec["type"] = "bool"
        spec["action"] = "store_true"
    else:
        spec["type"] = t or "str"
    _apply_choices(sym, spec, arg, raw_type)
    if "aliases" in arg:
        aliases = sym.value(arg["aliases"])
        if isinstance(aliases, list):
            spec["aliases"] = aliases
    d = sym.value(item.value)
    if d is not UNRESOLVED:
        spec["default"] = jsonable(d)
    return spec


def _apply_choices(sym: Symbols, spec: dict[str, Any], arg: dict[str, ast.expr], raw_type: ast.expr) -> None:
    choices = sym.value(arg["choices"]) if "choices" in arg else UNRESOLVED
    if choices is UNRESOLVED:
        choices = sym.literal_choices(raw_type)
        if "choices" in arg and not choices:
            spec["choices_unresolved"] = ast.unparse(arg["choices"])[:80]
    if choices:
        spec["choices"] = jsonable(list(choices))
        if spec["type"] in ("str", "choice"):
            spec["type"] = "choice"
