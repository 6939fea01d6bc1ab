#!/usr/bin/env python3
"""Build triage's engine truth tables from the engines' own source.

    python scripts/extract_engine_truth.py [--cache DIR] [--out triage/core/engine_truth]

vLLM and SGLang: the published source distributions are downloaded from PyPI (never installed; a wheel
when a release has no sdist), checked against the index's sha256, and the argument parser, config
dataclasses, env-var table and metrics modules are read with `ast`. TGI has no registry package: its
launcher (`launcher/src/main.rs`, clap arguments) and router metric files are read from
scripts/engine_sources/tgi/<tag>/ (fetched from huggingface/text-generation-inference at that tag, as the
README there shows; PROVENANCE.json names the commit; the files are not kept in this repository).

One JSON file per engine version lands in --out, each with its provenance (package and version or
repository and tag, every file read, its sha256). Then every claim of triage/engines/ledger/ is checked against the
fresh sources (scripts/verify_engine_claims.py): the exit code is its verdict. Re-running is safe: downloads are cached in --cache.
Nothing here runs at test time; tests read the committed JSON.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Every release people run: vLLM's last patch of every minor from 0.6 (0.8.5 and 0.18.0 were tabled before
# their later patches and are kept), SGLang's last build of every 0.5.N (it ships features in its third
# number) and the last 0.4 release. A version between two tabled ones is a gap the tables' test reports.
VLLM_VERSIONS = ("0.6.6.post1", "0.7.3", "0.8.5", "0.9.2", "0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1",
                 "0.15.1", "0.16.0", "0.17.1", "0.18.0", "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0",
                 "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
SGLANG_VERSIONS = ("0.4.10.post2", "0.5.1.post3", "0.5.2", "0.5.3.post3", "0.5.4.post3", "0.5.5.post3",
                   "0.5.6.post2", "0.5.7", "0.5.8.post1", "0.5.9", "0.5.10", "0.5.11", "0.5.12.post1",
                   "0.5.13.post1", "0.5.14", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20",
                   "0.5.21", "0.5.22", "0.5.23")
# TGI: the last patch of every minor from 2.0.
TGI_TAGS = ("v2.0.4", "v2.1.1", "v2.2.0", "v2.3.1", "v2.4.1", "v3.0.2", "v3.1.1", "v3.2.3", "v3.3.7")

# Files read per engine (suffix match inside the archive).
VLLM_FILES = (
    "vllm/engine/arg_utils.py", "vllm/config.py", "vllm/config/", "vllm/envs.py",
    "vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py",
    "vllm/entrypoints/launchers/cli_args.py", "vllm/entrypoints/cli/serve.py",
    "vllm/entrypoints/openai/api_server.py",
    "vllm/engine/metrics.py", "vllm/v1/metrics/loggers.py", "vllm/v1/spec_decode/metrics.py",
    "vllm/attention/utils/fa_utils.py", "vllm/v1/attention/backends/fa_utils.py",
    "vllm/model_executor/layers/quantization/__init__.py",
)
SGLANG_FILES = ("sglang/srt/server_args.py", "sglang/srt/metrics/", "sglang/srt/observability/",
                "sglang/srt/arg_groups/fields/", "sglang/srt/arg_groups/choices.py")
METRIC_CLASSES = {"gauge": "gauge", "counter": "counter", "histogram": "histogram", "summary": "summary"}


# ----------------------------------------------------------------------------------------- download

def _index(pkg: str) -> dict[str, Any]:
    req = urllib.request.Request(f"https://pypi.org/simple/{pkg}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def download(pkg: str, version: str, cache: Path, index: dict[str, Any]) -> tuple[Path, str]:
    """The sdist (or a py3.11 or abi3 x86_64 / pure wheel) of pkg==version, sha256-checked. -> (path, sha256)."""
    files = {f["filename"]: f for f in index["files"]}
    wanted = [f"{pkg}-{version}.tar.gz"]
    wanted += sorted(n for n in files if n.startswith(f"{pkg}-{version}-") and n.endswith(".whl")
                     and ("py3-none-any" in n or ("cp311-cp311-manylinux" in n or "cp38-abi3-manylinux" in n)
                                               and "x86_64" in n))
    for name in wanted:
        if name not in files:
            continue
        entry = files[name]
        dest = cache / name
        if not dest.exists():
            with urllib.request.urlopen(entry["url"], timeout=600) as resp:
                dest.write_bytes(resp.read())
        digest = hashlib.sha256(dest.read_bytes()).hexdigest()
        if digest != entry["hashes"]["sha256"]:
            dest.unlink()
            raise SystemExit(f"sha256 mismatch for {name}")
        return dest, digest
    raise SystemExit(f"no sdist or usable wheel for {pkg}=={version}")


def read_archive(path: Path, wanted: tuple[str, ...]) -> dict[str, bytes]:
    """{path inside the package (from the package dir on): bytes} for the wanted files."""
    out: dict[str, bytes] = {}

    def keep(name: str) -> str | None:
        for w in wanted:
            i = name.find(w)
            if i >= 0 and name.endswith(".py") and (not w.endswith("/") or "/" not in name[i + len(w):]):
                return name[i:]
        return None

    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                rel = keep(m.name) if m.isfile() else None
                if rel and rel not in out:
                    out[rel] = tar.extractfile(m).read()  # type: ignore[union-attr]
    else:
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                rel = keep(name)
                if rel and rel not in out:
                    out[rel] = z.read(name)
    return out


# ------------------------------------------------------------------------------------------ symbols

class Symbols:
    """Module-level names and class fields across every parsed file (enough to resolve defaults)."""

    def __init__(self) -> None:
        self.names: dict[str, ast.expr] = {}
        self.classes: dict[str, dict[str, tuple[ast.expr | None, ast.expr | None]]] = {}
        self.trees: dict[str, ast.Module] = {}

    def add(self, rel: str, source: bytes) -> None:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = ast.parse(_strip_type_statements(source.decode()))
        self.trees[rel] = tree
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.names.setdefault(node.targets[0].id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.names.setdefault(node.target.id, node.value)
            elif isinstance(node, ast.ClassDef):
                fields: dict[str, tuple[ast.expr | None, ast.expr | None]] = {}
                for base in node.bases:  # inherit fields from classes seen so far
                    if isinstance(base, ast.Name) and base.id in self.classes:
                        fields.update(self.classes[base.id])
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        fields[item.target.id] = (item.annotation, item.value)
                    elif isinstance(item, ast.Assign) and len(item.targets) == 1 \
                            and isinstance(item.targets[0], ast.Name):
                        fields[item.targets[0].id] = (None, item.value)
                self.classes.setdefault(node.name, fields)

    # -- values
    def value(self, node: ast.expr | None, depth: int = 0, cls: str | None = None) -> Any:
        """A literal value for `node` (names looked up in class `cls` first), or UNRESOLVED."""
        if node is None or depth > 8:
            return UNRESOLVED
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        if isinstance(node, ast.Name) and cls and node.id in self.classes.get(cls, {}):
            return self.value(self.classes[cls][node.id][1], depth + 1, cls)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out: list[Any] = []
            for e in node.elts:
                inner = self.value(e.value if isinstance(e, ast.Starred) else e, depth + 1, cls)
                if inner is UNRESOLVED:
                    return UNRESOLVED
                if isinstance(e, ast.Starred):
                    out.extend(inner)
                else:
                    out.append(inner)
            return out
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.value(self.names[node.id], depth + 1)
            return UNRESOLVED
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            fields = self.classes.get(node.value.id)
            if fields and node.attr in fields:
                return self.value(fields[node.attr][1], depth + 1, node.value.id)
            return UNRESOLVED
        if isinstance(node, ast.Call):
            fname = _call_name(node)
            if fname in ("Field", "field"):
                for kw in node.keywords:
                    if kw.arg == "default":
                        return self.value(kw.value, depth + 1, cls)
                if node.args:
                    return self.value(node.args[0], depth + 1, cls)
                return UNRESOLVED
            if fname in ("get_args",) and node.args:
                choices = self.literal_choices(node.args[0], depth + 1)
                return choices if choices is not None else UNRESOLVED
            if fname in ("list", "sorted", "tuple") and node.args:
                inner = self.value(node.args[0], depth + 1)
                if isinstance(inner, (list, tuple, dict, set)):
                    return sorted(inner) if fname == "sorted" else list(inner)
            return UNRESOLVED
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, depth + 1), self.value(node.right, depth + 1)
            if isinstance(left, list) and isinstance(right, list):
                return left + right
        return UNRESOLVED

    def literal_choices(self, node: ast.expr | None, depth: int = 0) -> list[Any] | None:
        """Literal["a", "b"] (possibly behind a name, Optional or a Union of Literals) -> ["a", "b"]."""
        if node is None or depth > 8:
            return None
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.literal_choices(self.names[node.id], depth + 1)
        if isinstance(node, ast.Subscript):
            head = _dotted(node.value)
            if head.endswith("Literal"):
                elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                out = []
                for e in elts:
                    v = self.value(e, depth + 1)
                    if v is UNRESOLVED:
                        sub = self.literal_choices(e, depth + 1)
                        if sub is None:
                            return None
                        out.extend(sub)
                    else:
                        out.append(v)
                return out
            if head.endswith(("Optional", "Union", "Annotated")):
                elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                if head.endswith("Annotated"):
                    elts = elts[:1]
                found: list[Any] = []
                for e in elts:
                    sub = self.literal_choices(e, depth + 1)
                    if sub:
                        found.extend(sub)
                return found or None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            found = (self.literal_choices(node.left, depth + 1) or []) + \
                (self.literal_choices(node.right, depth + 1) or [])
            return found or None
        return None

    def type_of(self, ann: ast.expr | None) -> str | None:
        """A dataclass annotation -> int | float | str | bool | json | list | None (unknown)."""
        if ann is None:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        parts = _union_parts(ann)
        names = set()
        for p in parts:
            if isinstance(p, ast.Constant) and p.value is None:
                continue
            head = _dotted(p.value) if isinstance(p, ast.Subscript) else _dotted(p)
            if head.endswith("Annotated") and isinstance(p, ast.Subscript):
                inner = p.slice.elts[0] if isinstance(p.slice, ast.Tuple) else p.slice
                t = self.type_of(inner)
                if t:
                    names.add(t)
                continue
            if head.endswith("Literal"):
                names.add("choice")
            elif head in ("bool",):
                names.add("bool")
            elif head in ("int",):
                names.add("int")
            elif head in ("float",):
                names.add("float")
            elif head in ("str",):
                names.add("str")
            elif head.lower().endswith(("dict", "mapping")) or head.endswith("Config"):
                names.add("json")
            elif head.lower().endswith(("list", "tuple", "set", "sequence")):
                names.add("list")
            elif isinstance(p, ast.Subscript) and head.rsplit(".", 1)[-1] in ("SkipValidation", "Final", "ClassVar"):
                inner = p.slice.elts[0] if isinstance(p.slice, ast.Tuple) else p.slice
                names.add(self.type_of(inner) or "str")
            elif head in self.names:
                choices = self.literal_choices(self.names[head])
                names.add("choice" if choices else self.type_of(self.names[head]) or "str")
            else:
                names.add("str")
        if names == {"bool", "str"}:
            return "str"
        for t in ("bool", "choice", "json", "list", "int", "float", "str"):
            if t in names:
                return t
        return None


class _Unresolved:
    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()


def _strip_type_statements(text: str) -> str:
    """Python 3.12 `type X = ...` statements -> `X = ...` so 3.11's ast can read the file."""
    return re.sub(r"^type\s+(\w+)(\[[^\]]*\])?\s*=", r"\1 =", text, flags=re.M)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _call_name(node: ast.Call) -> str:
    return _dotted(node.func).rsplit(".", 1)[-1]


def _union_parts(ann: ast.expr) -> list[ast.expr]:
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _union_parts(ann.left) + _union_parts(ann.right)
    if isinstance(ann, ast.Subscript) and _dotted(ann.value).endswith(("Optional", "Union")):
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        return [p for e in elts for p in _union_parts(e)]
    return [ann]


def _jsonable(v: Any) -> Any:
    if v is UNRESOLVED:
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple, set)):
        items = [_jsonable(x) for x in v]
        return sorted(items, key=str) if isinstance(v, set) else items
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


# --------------------------------------------------------------------------------- argparse flags

def extract_argparse(sym: Symbols, rels: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every `add_argument(...)` in the given files -> {canonical flag: spec}, unresolved notes."""
    flags: dict[str, dict[str, Any]] = {}
    unresolved: list[str] = []
    for rel in rels:
        tree = sym.trees.get(rel)
        if tree is None:
            continue
        kwargs_vars: dict[str, str] = {}  # cache_kwargs -> CacheConfig
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and _call_name(node.value) == "get_kwargs" and node.value.args \
                    and isinstance(node.targets[0], ast.Name):
                kwargs_vars[node.targets[0].id] = _dotted(node.value.args[0])
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _call_name(node) == "add_argument"):
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not names or not names[0].startswith("-"):
                continue
            spec = _argparse_spec(sym, node, kwargs_vars)
            long_names = [n for n in names if n.startswith("--")]
            canonical = long_names[0] if long_names else names[0]
            aliases = [n for n in names if n != canonical]
            if spec.get("action") == "bool_optional":
                aliases.append("--no-" + canonical[2:])
            if aliases:
                spec["aliases"] = aliases
            if spec.get("type") is None:
                unresolved.append(f"{canonical}: type")
            flags.setdefault(canonical, spec)
    return flags, unresolved


def _argparse_spec(sym: Symbols, call: ast.Call, kwargs_vars: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    field_ann: ast.expr | None = None
    field_default: Any = UNRESOLVED
    keywords = list(call.keywords)
    for kw in list(keywords):  # **{**scheduler_kwargs["max_num_seqs"], "default": None}
        if kw.arg is None and isinstance(kw.value, ast.Dict):
            keywords.remove(kw)
            for k, v in zip(kw.value.keys, kw.value.values, strict=True):
                if k is None:
                    keywords.append(ast.keyword(arg=None, value=v))
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    keywords.append(ast.keyword(arg=k.value, value=v))
    for kw in keywords:
        if kw.arg is None:  # **cache_kwargs["gpu_memory_utilization"] or **get_kwargs(X)["y"]
            v = kw.value
            if isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant):
                field = v.slice.value
                owner = kwargs_vars.get(_dotted(v.value), "")
                if isinstance(v.value, ast.Call) and _call_name(v.value) == "get_kwargs" and v.value.args:
                    owner = _dotted(v.value.args[0])
                fields = sym.classes.get(owner, {})
                if field in fields:
                    field_ann, value_node = fields[field]
                    field_default = sym.value(value_node, 0, owner)
                    spec["field"] = f"{owner}.{field}"
    explicit = {kw.arg: kw.value for kw in keywords if kw.arg}
    action = explicit.get("action")
    action_name = _dotted(action) if action is not None and not isinstance(action, ast.Constant) else \
        (action.value if isinstance(action, ast.Constant) else None)
    if action_name and "Deprecated" in action_name:
        spec["deprecated"] = True
        if "new_flag" in explicit:
            spec["replacement"] = _jsonable(sym.value(explicit["new_flag"]))
    if action_name and action_name.endswith("StoreTrueAction"):
        action_name = "store_true"
    if action_name in ("store_true", "store_false"):
        spec["type"] = "bool"
        spec["action"] = action_name
        spec["default"] = action_name == "store_false"
    elif action_name and action_name.endswith("BooleanOptionalAction"):
        spec["type"] = "bool"
        spec["action"] = "bool_optional"
    elif action_name and action_name.endswith("StoreBoolean"):
        spec["type"] = "bool_value"
    if "type" not in spec:
        t = explicit.get("type")
        tname = _dotted(t) if t is not None and not isinstance(t, ast.Call) else \
            (_call_name(t) if isinstance(t, ast.Call) else "")
        inner = ""
        if isinstance(t, ast.Call) and t.args:  # optional_type(int)
            inner = _dotted(t.args[0])
        base = {"int": "int", "float": "float", "str": "str", "nullable_str": "str", "human_readable_int": "int",
                "human_readable_int_or_auto": "int", "optional_type": {"int": "int", "float": "float"}.get(inner, "str"),
                "json.loads": "json", "parse_type": "json", "bool": "bool_value"}.get(tname)
        if base is None and field_ann is not None:
            base = sym.type_of(field_ann)
            if base == "bool":
                spec["action"] = "bool_optional"
        if base is None and tname:
            base = "str"
        if base is None and "choices" in explicit:
            base = "choice"
        if base is None and field_ann is None and "type" not in explicit:
            base = "str"  # argparse's default type
        spec["type"] = base
    if "choices" in explicit:
        choices = sym.value(explicit["choices"])
        if choices is not UNRESOLVED:
            spec["choices"] = _jsonable(list(choices))
        else:
            spec["choices_unresolved"] = ast.unparse(explicit["choices"])[:80]
    elif field_ann is not None:
        choices = sym.literal_choices(field_ann)
        if choices:
            spec["choices"] = _jsonable(choices)
    if spec.get("choices") and spec.get("type") in (None, "str", "choice"):
        spec["type"] = "choice"
    if "default" in explicit:
        d = sym.value(explicit["default"])
        if d is not UNRESOLVED:
            spec["default"] = _jsonable(d)
        if field_default is not UNRESOLVED and _jsonable(field_default) != spec.get("default"):
            spec["config_default"] = _jsonable(field_default)  # the config class decides at startup
    elif field_default is not UNRESOLVED:
        spec["default"] = _jsonable(field_default)
    if "nargs" in explicit:
        spec["nargs"] = _jsonable(sym.value(explicit["nargs"]))
    if "deprecated" in explicit and sym.value(explicit["deprecated"]) is True:
        spec["deprecated"] = True
    return spec


def add_dataclass_flags(sym: Symbols, cls: str, flags: dict[str, dict[str, Any]]) -> None:
    """Frontend dataclasses whose every field becomes `--field-name` (vLLM's FrontendArgs)."""
    for field, (ann, value) in sym.classes.get(cls, {}).items():
        if ann is None or field.startswith("_"):
            continue
        name = "--" + field.replace("_", "-")
        if name in flags:
            continue
        spec: dict[str, Any] = {"type": sym.type_of(ann) or "str", "field": f"{cls}.{field}"}
        if spec["type"] == "bool":
            spec["action"] = "bool_optional"
            spec["aliases"] = ["--no-" + name[2:]]
        choices = sym.literal_choices(ann)
        if choices:
            spec["choices"] = _jsonable(choices)
        d = sym.value(value)
        if d is not UNRESOLVED:
            spec["default"] = _jsonable(d)
        flags[name] = spec


def add_annotated_flags(sym: Symbols, rels: list[str], flags: dict[str, dict[str, Any]]) -> list[str]:
    """SGLang >= 0.5.2x declares flags as dataclass fields `name: A[T, "help" | Arg(...)] = default`
    (sglang/srt/arg_groups/arg_utils.py: add_cli_args_from_dataclass)."""
    unresolved: list[str] = []
    for rel in rels:
        tree = sym.trees.get(rel)
        if tree is None:
            continue
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for item in cls.body:
                if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        and isinstance(item.annotation, ast.Subscript)
                        and _dotted(item.annotation.value) in ("A", "Annotated")
                        and isinstance(item.annotation.slice, ast.Tuple)):
                    continue
                raw_type, meta = item.annotation.slice.elts[0], item.annotation.slice.elts[1]
                arg: dict[str, ast.expr] = {}
                if isinstance(meta, ast.Call) and _call_name(meta) == "Arg":
                    arg = {kw.arg: kw.value for kw in meta.keywords if kw.arg}
                elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
                    continue
                if sym.value(arg.get("no_cli")) is True:
                    continue
                field = item.target.id
                cli = sym.value(arg["cli_name"]) if "cli_name" in arg else "--" + field.replace("_", "-")
                spec: dict[str, Any] = {"field": f"{cls.name}.{field}"}
                t = sym.type_of(raw_type)
                if "action" in arg:
                    spec["type"] = "str"
                    spec["action"] = ast.unparse(arg["action"])[:60]
                elif t == "bool":
                    spec["type"] = "bool"
                    spec["action"] = "store_true"
                else:
                    spec["type"] = t or "str"
                choices = sym.value(arg["choices"]) if "choices" in arg else UNRESOLVED
                if choices is UNRESOLVED:
                    choices = sym.literal_choices(raw_type)
                    if "choices" in arg and not choices:
                        spec["choices_unresolved"] = ast.unparse(arg["choices"])[:80]
                if choices:
                    spec["choices"] = _jsonable(list(choices))
                    if spec["type"] in ("str", "choice"):
                        spec["type"] = "choice"
                if "aliases" in arg:
                    aliases = sym.value(arg["aliases"])
                    if isinstance(aliases, list):
                        spec["aliases"] = aliases
                d = sym.value(item.value) if item.value is not None else UNRESOLVED
                if d is not UNRESOLVED:
                    spec["default"] = _jsonable(d)
                if not isinstance(cli, str):
                    unresolved.append(f"{cls.name}.{field}: cli name")
                    continue
                flags.setdefault(cli, spec)
    return unresolved


# ------------------------------------------------------------------------------------------ metrics

def extract_metrics(sym: Symbols, rels: list[str], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for rel in rels:
        tree = sym.trees.get(rel)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fname = _call_name(node).lower().strip("_")
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


_METRIC_NAME = re.compile(r"^[a-z_]+:[a-z0-9_]+$")


def _indirect_metrics(fn: ast.AST, prefix: str) -> list[tuple[str, str]]:
    """Names built apart from the metric's constructor inside one function: `name = "vllm:cache_config_info"`
    then `Gauge(name=name, ...)`, or a list of `("vllm:spec_decode_num_drafts", doc)` pairs turned into
    counters in a loop (vLLM >= 0.11). The kind is the one metric class the function constructs."""
    kinds = {k for call in ast.walk(fn) if isinstance(call, ast.Call)
             for k in METRIC_CLASSES if k in _call_name(call).lower()}
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


def vllm_env_vars(sym: Symbols) -> dict[str, str | None]:
    """envs.py's `environment_variables` keys -> the default os.getenv gives (a string) or None."""
    tree = sym.trees.get("vllm/envs.py")
    out: dict[str, str | None] = {}
    if tree is None:
        return out
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        if target != "environment_variables" or not isinstance(node.value, ast.Dict):
            continue
        for k, v in zip(node.value.keys, node.value.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                continue
            default = None
            for call in ast.walk(v):
                if isinstance(call, ast.Call) and _call_name(call) in ("getenv", "get") and len(call.args) >= 2 \
                        and isinstance(call.args[0], ast.Constant) and call.args[0].value == k.value \
                        and isinstance(call.args[1], ast.Constant):
                    default = call.args[1].value if isinstance(call.args[1].value, str) else str(call.args[1].value)
                    break
            out[k.value] = default
    return out


# ----------------------------------------------------------------------------------------- engines

def _file_provenance(files: dict[str, bytes], used: list[str]) -> dict[str, str]:
    return {rel: hashlib.sha256(files[rel]).hexdigest() for rel in sorted(used) if rel in files}


def vllm_table(version: str, archive: Path, sha: str) -> dict[str, Any]:
    files = read_archive(archive, VLLM_FILES)
    sym = Symbols()
    order = sorted(files, key=lambda r: (not r.startswith("vllm/config"), r))  # config classes first
    for rel in order:
        sym.add(rel, files[rel])
    parser_files = [r for r in ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py",
                                "vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
                                "vllm/entrypoints/cli/serve.py") if r in files]
    flags, unresolved = extract_argparse(sym, parser_files)
    for cls in ("BaseFrontendArgs", "FrontendArgs"):
        add_dataclass_flags(sym, cls, flags)
    metric_files = [r for r in files if "metrics" in r]
    metrics = extract_metrics(sym, metric_files, "vllm:")
    env = vllm_env_vars(sym)
    fa_src = next((files[r].decode() for r in ("vllm/v1/attention/backends/fa_utils.py",
                                               "vllm/attention/utils/fa_utils.py") if r in files), "")
    defaults = {
        "gpu_memory_utilization": flags.get("--gpu-memory-utilization", {}).get("default"),
        "max_num_seqs": flags.get("--max-num-seqs", {}).get("default"),
        "max_num_batched_tokens": flags.get("--max-num-batched-tokens", {}).get("default"),
        "enable_prefix_caching": flags.get("--enable-prefix-caching", {}).get("default"),
        "enable_chunked_prefill": flags.get("--enable-chunked-prefill", {}).get("default"),
        "enforce_eager": flags.get("--enforce-eager", {}).get("default", False),
        "v1_engine_default": (env.get("VLLM_USE_V1") == "1") if "VLLM_USE_V1" in env else
        ("VLLM_USE_V1" not in env and version.split(".")[:2] != ["0", "6"]),
        "flash_attn_3_on_sm90": bool(re.search(r"major\s*==\s*9", fa_src)),
        "flash_attn_4_on_sm100": bool(re.search(r"major\s*==\s*10\s*and\s*is_fa_version_supported\(4\)", fa_src)),
        "attention_backend_flag": "--attention-backend" in flags,
        "attention_backend_env": "VLLM_ATTENTION_BACKEND" in env,
    }
    used = parser_files + metric_files + [r for r in files if r.startswith("vllm/config") or r.endswith(
        ("envs.py", "fa_utils.py", "quantization/__init__.py"))]
    return {
        "engine": "vllm", "version": version,
        "provenance": {"package": f"vllm=={version}", "archive": archive.name, "archive_sha256": sha,
                       "files": _file_provenance(files, used)},
        "flags": dict(sorted(flags.items())), "metrics": metrics,
        "env": sorted(env), "defaults": defaults, "unresolved": sorted(set(unresolved)),
    }


def sglang_table(version: str, archive: Path, sha: str) -> dict[str, Any]:
    files = read_archive(archive, SGLANG_FILES)
    sym = Symbols()
    for rel in sorted(files):
        sym.add(rel, files[rel])
    flags, unresolved = extract_argparse(sym, ["sglang/srt/server_args.py"])
    # Annotated dataclass fields: in server_args.py itself (0.5.14 to 0.5.19), then in arg_groups/fields/
    unresolved += add_annotated_flags(sym, ["sglang/srt/server_args.py",
                                            *sorted(r for r in files if "arg_groups/fields/" in r)], flags)
    metrics = extract_metrics(sym, [r for r in files if "metrics" in r or "observability" in r], "sglang:")
    defaults = {
        "gpu_memory_utilization": flags.get("--mem-fraction-static", {}).get("default"),
        "max_num_seqs": flags.get("--max-running-requests", {}).get("default"),
        "max_num_batched_tokens": flags.get("--chunked-prefill-size", {}).get("default"),
        "enable_prefix_caching": not flags.get("--disable-radix-cache", {}).get("default", False),
        "enable_chunked_prefill": True,
        "enforce_eager": flags.get("--disable-cuda-graph", {}).get("default", False),
        "attention_backend_flag": "--attention-backend" in flags,
    }
    return {
        "engine": "sglang", "version": version,
        "provenance": {"package": f"sglang=={version}", "archive": archive.name, "archive_sha256": sha,
                       "files": _file_provenance(files, list(files))},
        "flags": dict(sorted(flags.items())), "metrics": metrics, "env": [], "defaults": defaults,
        "unresolved": sorted(set(unresolved)),
    }


_CLAP_FIELD = re.compile(r"#\[clap\(([^\]]*)\)\]\s*(?:///[^\n]*\n\s*)*(?:pub\s+)?(\w+)\s*:\s*([^,\n]+),", re.S)
_ENUM = re.compile(r"enum\s+(\w+)\s*\{(.*?)\n\}", re.S)


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _clap_enums(src: str) -> dict[str, list[str]]:
    out = {}
    for m in _ENUM.finditer(src):
        values, pending = [], None
        for line in m.group(2).splitlines():
            line = line.strip()
            named = re.match(r'#\[clap\(name\s*=\s*"([^"]+)"', line)
            if named:
                pending = named.group(1)
                continue
            var = re.match(r"([A-Z]\w*)\s*[,({]?", line)
            if var and not line.startswith(("//", "#")):
                values.append(pending or _kebab(var.group(1)))
                pending = None
        out[m.group(1)] = values
    return out


def tgi_flags(src: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The launcher's `struct Args` clap fields -> flags."""
    body = re.search(r"struct Args\s*\{(.*?)\n\}", src, re.S)
    enums = _clap_enums(src)
    flags: dict[str, dict[str, Any]] = {}
    unresolved: list[str] = []
    if body is None:
        return flags, ["struct Args not found"]
    text = re.sub(r"^\s*///.*$", "", body.group(1), flags=re.M)
    for m in _CLAP_FIELD.finditer(text):
        attrs, field, rtype = m.group(1), m.group(2), m.group(3).strip()
        if "long" not in attrs:
            continue
        long_m = re.search(r'long\s*=\s*"([^"]+)"', attrs)
        name = "--" + (long_m.group(1) if long_m else field.replace("_", "-"))
        spec: dict[str, Any] = {"field": field}
        env_m = re.search(r'env\s*=\s*"([^"]+)"', attrs)
        if env_m:
            spec["env"] = [env_m.group(1)]
        elif re.search(r"\benv\b", attrs):
            spec["env"] = [field.upper()]
        short_m = re.search(r"short(?:\s*=\s*'(\w)')?", attrs)
        if short_m and re.search(r"\bshort\b", attrs):
            spec["aliases"] = ["-" + (short_m.group(1) or field[0])]
        inner = re.sub(r"^Option<(.*)>$", r"\1", rtype)
        vec = inner.startswith("Vec<")
        inner = re.sub(r"^Vec<(.*)>$", r"\1", inner)
        if inner == "bool":
            spec["type"] = "bool"
            spec["action"] = "store_true" if "value_enum" not in attrs else "bool_value"
        elif inner in ("usize", "u32", "u64", "i32", "i64", "u16"):
            spec["type"] = "int"
        elif inner in ("f32", "f64"):
            spec["type"] = "float"
        elif inner in enums:
            spec["type"] = "choice"
            spec["choices"] = enums[inner]
        elif inner in ("String", "PathBuf"):
            spec["type"] = "str"
        else:
            spec["type"] = "str"
            unresolved.append(f"{name}: type {rtype}")
        if vec:
            spec["nargs"] = "list"
        dv = re.search(r'default_value\s*=\s*"([^"]*)"', attrs)
        if dv:
            raw = dv.group(1)
            spec["default"] = {"int": lambda s: int(s), "float": lambda s: float(s)}.get(
                spec["type"], lambda s: s)(raw)
        elif spec["type"] == "bool" and "default_value_t" not in attrs:
            spec["default"] = False
        flags[name] = spec
    return dict(sorted(flags.items())), unresolved


def tgi_memory_defaults(launcher: str, server_globals: str) -> dict[str, Any]:
    """Two different wiggle rooms: the launcher's (only its VRAM estimate for --max-total-tokens) and the
    server's (globals.py, the fraction of free memory the KV cache is sized with)."""
    launcher_room = re.search(r'"TGI_WIGGLE_ROOM"\)[^;]*?unwrap_or\(([\d.]+)\)', launcher, re.S)
    kv_room = re.search(r'TGI_WIGGLE_ROOM\s*=\s*float\(os\.getenv\("TGI_WIGGLE_ROOM",\s*"([\d.]+)"\)', server_globals)
    return {"memory_wiggle_room": float(kv_room.group(1)) if kv_room else None,
            "launcher_vram_wiggle_room": float(launcher_room.group(1)) if launcher_room else None}


def tgi_feature_defaults(launcher: str, server_globals: str) -> dict[str, Any]:
    """Prefix caching: the launcher's own default for the variable it exports (absent before 2.3: none).
    Chunked prefill: the server's PREFILL_CHUNKING default (absent before 2.4: none)."""
    env = re.search(r'std::env::var\("((?:USE_)?PREFIX_CACHING)"\)', launcher)
    prefix = re.search(r'prefix_caching\.unwrap_or\("(\w+)"', launcher)
    chunk = re.search(r'PREFILL_CHUNKING\s*=\s*os\.getenv\("PREFILL_CHUNKING",\s*"(\w+)"\)', server_globals)
    return {"enable_prefix_caching": bool(prefix) and prefix.group(1).lower() in ("1", "true"),
            "prefix_caching_env": env.group(1) if env else None,
            "enable_chunked_prefill": bool(chunk) and chunk.group(1).lower() in ("1", "true"),
            "prefill_chunking_env": "PREFILL_CHUNKING" if chunk else None}


def tgi_table(tag: str, src_dir: Path) -> dict[str, Any]:
    prov = json.loads((src_dir.parent / "PROVENANCE.json").read_text())[tag]
    if not (src_dir / "launcher/src/main.rs").is_file():
        sys.exit(f"extract_engine_truth: TGI {tag}'s sources are not in {src_dir}; fetch them at commit "
                 f"{prov['commit']} as scripts/engine_sources/tgi/README.md shows, or pass --only vllm --only sglang")
    launcher = (src_dir / "launcher/src/main.rs").read_text()
    flags, unresolved = tgi_flags(launcher)
    metrics: dict[str, str] = {}
    rels = sorted(str(p.relative_to(src_dir)) for p in src_dir.rglob("*") if p.suffix in (".rs", ".py"))
    for rel in (r for r in rels if r.endswith(".rs")):
        for m in re.finditer(r'metrics::(counter|gauge|histogram)!\(\s*"(tgi_\w+)"', (src_dir / rel).read_text()):
            metrics.setdefault(m.group(2), m.group(1))
    env_reads = sorted(set(re.findall(r'env::var\("([A-Z_]+)"\)', launcher)))
    globals_py = src_dir / "server/text_generation_server/models/globals.py"
    server_globals = globals_py.read_text() if globals_py.is_file() else ""
    defaults = {
        "gpu_memory_utilization": flags.get("--cuda-memory-fraction", {}).get("default"),
        **tgi_memory_defaults(launcher, server_globals),
        # TGI's batch cap is --max-batch-size (no cap by default); --max-concurrent-requests refuses clients
        "max_num_seqs": flags.get("--max-batch-size", {}).get("default"),
        "max_concurrent_requests": flags.get("--max-concurrent-requests", {}).get("default"),
        "max_num_batched_tokens": flags.get("--max-batch-prefill-tokens", {}).get("default"),
        **tgi_feature_defaults(launcher, server_globals),
        "attention_env": "ATTENTION" if '"ATTENTION"' in launcher else None,
    }
    return {
        "engine": "tgi", "version": tag.lstrip("v"),
        "provenance": {"repository": "huggingface/text-generation-inference", "tag": tag, "commit": prov["commit"],
                       "files": {rel: hashlib.sha256((src_dir / rel).read_bytes()).hexdigest() for rel in rels}},
        "flags": flags, "metrics": dict(sorted(metrics.items())), "env": env_reads, "defaults": defaults,
        "unresolved": unresolved,
    }


def write(table: dict[str, Any], out: Path) -> Path:
    path = out / f"{table['engine']}-{table['version']}.json"
    path.write_text(json.dumps(table, sort_keys=False, separators=(",", ":")) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/tmp/triage-engine-truth"))
    ap.add_argument("--out", type=Path, default=ROOT / "triage/core/engine_truth")
    ap.add_argument("--tgi-sources", type=Path, default=ROOT / "scripts/engine_sources/tgi")
    ap.add_argument("--only", choices=("vllm", "sglang", "tgi"), action="append")
    ap.add_argument("--version", action="append", help="only these versions (repeatable); default: all listed")
    ap.add_argument("--git", action="append", default=[], metavar="ORIGIN=DIR",
                    help="a local clone for the claims the ledger reads from git (e.g. ollama/ollama=DIR)")
    args = ap.parse_args(argv)
    pick = (lambda versions: [v for v in versions if v in args.version]) if args.version else list
    args.cache.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    only = set(args.only or ("vllm", "sglang", "tgi"))
    if "vllm" in only:
        idx = _index("vllm")
        for v in pick(VLLM_VERSIONS):
            path, sha = download("vllm", v, args.cache, idx)
            print(write(vllm_table(v, path, sha), args.out), file=sys.stderr)
    if "sglang" in only:
        idx = _index("sglang")
        for v in pick(SGLANG_VERSIONS):
            path, sha = download("sglang", v, args.cache, idx)
            print(write(sglang_table(v, path, sha), args.out), file=sys.stderr)
    if "tgi" in only:
        for tag in TGI_TAGS:
            print(write(tgi_table(tag, args.tgi_sources / tag), args.out), file=sys.stderr)
    # The sources are fresh: check every claim of the ledger against them (scripts/verify_engine_claims.py).
    from verify_engine_claims import main as verify_claims

    git_args = [x for g in args.git for x in ("--git", g)]
    return verify_claims(["--cache", str(args.cache), *git_args])


if __name__ == "__main__":
    sys.exit(main())

