"""Small `ast` helpers shared by the extractors, and the UNRESOLVED marker."""
from __future__ import annotations

import ast
import re
from typing import Any


class _Unresolved:
    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED = _Unresolved()


def strip_type_statements(text: str) -> str:
    """Python 3.12 `type X = ...` statements -> `X = ...` so 3.11's ast can read the file."""
    return re.sub(r"^type\s+(\w+)(\[[^\]]*\])?\s*=", r"\1 =", text, flags=re.M)


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def call_name(node: ast.Call) -> str:
    return dotted(node.func).rsplit(".", 1)[-1]


def slice_elts(node: ast.Subscript) -> list[ast.expr]:
    """`X[a, b]` -> [a, b]; `X[a]` -> [a]."""
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


def union_parts(ann: ast.expr) -> list[ast.expr]:
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return union_parts(ann.left) + union_parts(ann.right)
    if isinstance(ann, ast.Subscript) and dotted(ann.value).endswith(("Optional", "Union")):
        return [p for e in slice_elts(ann) for p in union_parts(e)]
    return [ann]


def jsonable(v: Any) -> Any:
    if v is UNRESOLVED:
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple, set)):
        items = [jsonable(x) for x in v]
        return sorted(items, key=str) if isinstance(v, set) else items
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return str(v)
