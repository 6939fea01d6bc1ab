"""argparse flags: every `add_argument(...)` call, and frontend dataclasses whose fields become flags
(vLLM's FrontendArgs). A flag backed by a config-class field (`**cache_kwargs["x"]`) takes its type,
choices and default from that field."""
from __future__ import annotations

import ast
from typing import Any

from .ast_util import UNRESOLVED, call_name, dotted, jsonable
from .symbols import Symbols

Spec = dict[str, Any]
# argparse `type=` callables -> the flag type (optional_type(int) is read from its argument).
_TYPE_BASES = {"int": "int", "float": "float", "str": "str", "nullable_str": "str", "human_readable_int": "int",
               "human_readable_int_or_auto": "int", "json.loads": "json", "parse_type": "json", "bool": "bool_value"}


def extract_argparse(sym: Symbols, rels: list[str]) -> tuple[dict[str, Spec], list[str]]:
    """Every `add_argument(...)` in the given files -> {canonical flag: spec}, unresolved notes."""
    flags: dict[str, Spec] = {}
    unresolved: list[str] = []
    for rel in rels:
        tree = sym.trees.get(rel)
        if tree is None:
            continue
        kwargs_vars = _kwargs_vars(tree)
        for node in ast.walk(tree):
            names = _option_names(node)
            if not names:
                continue
            spec = _argparse_spec(sym, node, kwargs_vars)
            canonical = _name_flag(spec, names)
            if spec.get("type") is None:
                unresolved.append(f"{canonical}: type")
            flags.setdefault(canonical, spec)
    return flags, unresolved


def _kwargs_vars(tree: ast.Module) -> dict[str, str]:
    """`cache_kwargs = get_kwargs(CacheConfig)` -> {"cache_kwargs": "CacheConfig"}."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and call_name(node.value) == "get_kwargs" and node.value.args \
                and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = dotted(node.value.args[0])
    return out


def _option_names(node: ast.AST) -> list[str]:
    """The option strings of an `add_argument("--x", "-x", ...)` call; [] for anything else."""
    if not (isinstance(node, ast.Call) and call_name(node) == "add_argument"):
        return []
    names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return names if names and names[0].startswith("-") else []


def _name_flag(spec: Spec, names: list[str]) -> str:
    """The canonical name (the first long one); the others, and `--no-x` of a bool_optional, are aliases."""
    long_names = [n for n in names if n.startswith("--")]
    canonical = long_names[0] if long_names else names[0]
    aliases = [n for n in names if n != canonical]
    if spec.get("action") == "bool_optional":
        aliases.append("--no-" + canonical[2:])
    if aliases:
        spec["aliases"] = aliases
    return canonical


def _argparse_spec(sym: Symbols, call: ast.Call, kwargs_vars: dict[str, str]) -> Spec:
    spec: Spec = {}
    keywords = _flatten_keywords(call)
    field_ann, field_default = _config_field(sym, keywords, kwargs_vars, spec)
    explicit = {kw.arg: kw.value for kw in keywords if kw.arg}
    _apply_action(sym, spec, explicit)
    _apply_type(sym, spec, explicit, field_ann)
    _apply_choices(sym, spec, explicit, field_ann)
    _apply_defaults(sym, spec, explicit, field_default)
    return spec


def _flatten_keywords(call: ast.Call) -> list[ast.keyword]:
    """`**{**scheduler_kwargs["max_num_seqs"], "default": None}` -> its entries as keywords."""
    keywords = list(call.keywords)
    for kw in list(keywords):
        if kw.arg is None and isinstance(kw.value, ast.Dict):
            keywords.remove(kw)
            for k, v in zip(kw.value.keys, kw.value.values, strict=True):
                if k is None:
                    keywords.append(ast.keyword(arg=None, value=v))
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    keywords.append(ast.keyword(arg=k.value, value=v))
    return keywords


def _config_field(sym: Symbols, keywords: list[ast.keyword], kwargs_vars: dict[str, str],
                  spec: Spec) -> tuple[ast.expr | None, Any]:
    """`**cache_kwargs["gpu_memory_utilization"]` or `**get_kwargs(X)["y"]` -> (annotation, default) of
    the config-class field behind the flag; spec["field"] names it."""
    field_ann: ast.expr | None = None
    field_default: Any = UNRESOLVED
    for kw in keywords:
        owner_field = _splat_owner_field(kw, kwargs_vars) if kw.arg is None else None
        if owner_field is None:
            continue
        owner, field = owner_field
        fields = sym.classes.get(owner, {})
        if field in fields:
            field_ann, value_node = fields[field]
            field_default = sym.value(value_node, 0, owner)
            spec["field"] = f"{owner}.{field}"
    return field_ann, field_default


def _splat_owner_field(kw: ast.keyword, kwargs_vars: dict[str, str]) -> tuple[str, Any] | None:
    v = kw.value
    if not (isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant)):
        return None
    owner = kwargs_vars.get(dotted(v.value), "")
    if isinstance(v.value, ast.Call) and call_name(v.value) == "get_kwargs" and v.value.args:
        owner = dotted(v.value.args[0])
    return owner, v.slice.value


def _action_name(action: ast.expr | None) -> Any:
    if action is None:
        return None
    if isinstance(action, ast.Constant):
        return action.value
    return dotted(action)


def _apply_action(sym: Symbols, spec: Spec, explicit: dict[str, ast.expr]) -> None:
    name = _action_name(explicit.get("action"))
    if not name:
        return
    if "Deprecated" in name:
        spec["deprecated"] = True
        if "new_flag" in explicit:
            spec["replacement"] = jsonable(sym.value(explicit["new_flag"]))
    if name.endswith("StoreTrueAction"):
        name = "store_true"
    if name in ("store_true", "store_false"):
        spec["type"] = "bool"
        spec["action"] = name
        spec["default"] = name == "store_false"
    elif name.endswith("BooleanOptionalAction"):
        spec["type"] = "bool"
        spec["action"] = "bool_optional"
    elif name.endswith("StoreBoolean"):
        spec["type"] = "bool_value"


def _type_name(t: ast.expr | None) -> tuple[str, str]:
    """`type=int` -> ("int", ""); `type=optional_type(int)` -> ("optional_type", "int")."""
    if t is None:
        return "", ""
    if isinstance(t, ast.Call):
        return call_name(t), (dotted(t.args[0]) if t.args else "")
    return dotted(t), ""


def _apply_type(sym: Symbols, spec: Spec, explicit: dict[str, ast.expr], field_ann: ast.expr | None) -> None:
    if "type" in spec:
        return
    tname, inner = _type_name(explicit.get("type"))
    base = {"int": "int", "float": "float"}.get(inner, "str") if tname == "optional_type" else _TYPE_BASES.get(tname)
    if base is None and field_ann is not None:
        base = sym.type_of(field_ann)
        if base == "bool":
            spec["action"] = "bool_optional"
    if base is None:
        base = _fallback_type(tname, explicit, field_ann)
    spec["type"] = base


def _fallback_type(tname: str, explicit: dict[str, ast.expr], field_ann: ast.expr | None) -> str | None:
    if tname:
        return "str"
    if "choices" in explicit:
        return "choice"
    if field_ann is None and "type" not in explicit:
        return "str"  # argparse's default type
    return None


def _apply_choices(sym: Symbols, spec: Spec, explicit: dict[str, ast.expr], field_ann: ast.expr | None) -> None:
    if "choices" in explicit:
        choices = sym.value(explicit["choices"])
        if choices is not UNRESOLVED:
            spec["choices"] = jsonable(list(choices))
        else:
            spec["choices_unresolved"] = ast.unparse(explicit["choices"])[:80]
    elif field_ann is not None:
        choices = sym.literal_choices(field_ann)
        if choices:
            spec["choices"] = jsonable(choices)
    if spec.get("choices") and spec.get("type") in (None, "str", "choice"):
        spec["type"] = "choice"


def _apply_defaults(sym: Symbols, spec: Spec, explicit: dict[str, ast.expr], field_default: Any) -> None:
    if "default" in explicit:
        d = sym.value(explicit["default"])
        if d is not UNRESOLVED:
            spec["default"] = jsonable(d)
        if field_default is not UNRESOLVED and jsonable(field_default) != spec.get("default"):
            spec["config_default"] = jsonable(field_default)  # the config class decides at startup
    elif field_default is not UNRESOLVED:
        spec["default"] = jsonable(field_default)
    if "nargs" in explicit:
        spec["nargs"] = jsonable(sym.value(explicit["nargs"]))
    if "deprecated" in explicit and sym.value(explicit["deprecated"]) is True:
        spec["deprecated"] = True


def add_dataclass_flags(sym: Symbols, cls: str, flags: dict[str, Spec]) -> None:
    """Frontend dataclasses whose every field becomes `--field-name` (vLLM's FrontendArgs)."""
    for field, (ann, value) in sym.classes.get(cls, {}).items():
        if ann is None or field.startswith("_"):
            continue
        name = "--" + field.replace("_", "-")
        if name in flags:
            continue
        spec: Spec = {"type": sym.type_of(ann) or "str", "field": f"{cls}.{field}"}
        if spec["type"] == "bool":
            spec["action"] = "bool_optional"
            spec["aliases"] = ["--no-" + name[2:]]
        choices = sym.literal_choices(ann)
        if choices:
            spec["choices"] = jsonable(choices)
        d = sym.value(value)
        if d is not UNRESOLVED:
            spec["default"] = jsonable(d)
        flags[name] = spec
