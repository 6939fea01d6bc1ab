"""Module-level names and class fields across every parsed file, and what they resolve to: literal
values, Literal[...] choices, and a flag type for a dataclass annotation."""
from __future__ import annotations

import ast
from typing import Any

from .ast_util import UNRESOLVED, call_name, dotted, slice_elts, strip_type_statements, union_parts

Fields = dict[str, tuple[ast.expr | None, ast.expr | None]]
MAX_DEPTH = 8
# When one annotation allows several types, the flag takes the first of these it allows.
TYPE_PRECEDENCE = ("bool", "choice", "json", "list", "int", "float", "str")
_WRAPPERS = ("SkipValidation", "Final", "ClassVar")


class Symbols:
    """Module-level names and class fields across every parsed file (enough to resolve defaults)."""

    def __init__(self) -> None:
        self.names: dict[str, ast.expr] = {}
        self.classes: dict[str, Fields] = {}
        self.trees: dict[str, ast.Module] = {}

    def add(self, rel: str, source: bytes) -> None:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = ast.parse(strip_type_statements(source.decode()))
        self.trees[rel] = tree
        for node in tree.body:
            named = _assigned_name(node)
            if named is not None:
                self.names.setdefault(*named)
            elif isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, self._class_fields(node))

    def _class_fields(self, node: ast.ClassDef) -> Fields:
        fields: Fields = {}
        for base in node.bases:  # inherit fields from classes seen so far
            if isinstance(base, ast.Name) and base.id in self.classes:
                fields.update(self.classes[base.id])
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                fields[item.target.id] = (item.annotation, item.value)
            elif isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                fields[item.targets[0].id] = (None, item.value)
        return fields

    # -- values
    def value(self, node: ast.expr | None, depth: int = 0, cls: str | None = None) -> Any:
        """A literal value for `node` (names looked up in class `cls` first), or UNRESOLVED."""
        if node is None or depth > MAX_DEPTH:
            return UNRESOLVED
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        if isinstance(node, ast.Name):
            return self._name_value(node, depth, cls)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._sequence_value(node, depth, cls)
        if isinstance(node, ast.Attribute):
            return self._attribute_value(node, depth)
        if isinstance(node, ast.Call):
            return self._call_value(node, depth, cls)
        if isinstance(node, ast.BinOp):
            return self._sum_value(node, depth)
        if isinstance(node, ast.ListComp):
            return self._enum_values(node, depth)
        return UNRESOLVED

    def _enum_values(self, node: ast.ListComp, depth: int) -> Any:
        """`[f.value for f in LoadFormat]`: the values of an enum class's members, in order."""
        gen = node.generators[0] if len(node.generators) == 1 else None
        if gen is None or gen.ifs or not isinstance(gen.iter, ast.Name) or not isinstance(gen.target, ast.Name):
            return UNRESOLVED
        elt = node.elt
        if not (isinstance(elt, ast.Attribute) and elt.attr == "value" and isinstance(elt.value, ast.Name)
                and elt.value.id == gen.target.id):
            return UNRESOLVED
        members = self.classes.get(gen.iter.id)
        if not members:
            return UNRESOLVED
        values = [self.value(v, depth + 1, gen.iter.id) for ann, v in members.values() if ann is None]
        return UNRESOLVED if not values or UNRESOLVED in values else values

    def _name_value(self, node: ast.Name, depth: int, cls: str | None) -> Any:
        if cls and node.id in self.classes.get(cls, {}):
            return self.value(self.classes[cls][node.id][1], depth + 1, cls)
        if node.id in self.names:
            return self.value(self.names[node.id], depth + 1)
        return UNRESOLVED

    def _sequence_value(self, node: ast.List | ast.Tuple | ast.Set, depth: int, cls: str | None) -> Any:
        out: list[Any] = []
        for e in node.elts:
            starred = isinstance(e, ast.Starred)
            inner = self.value(e.value if starred else e, depth + 1, cls)
            if inner is UNRESOLVED:
                return UNRESOLVED
            if starred:
                out.extend(inner)
            else:
                out.append(inner)
        return out

    def _attribute_value(self, node: ast.Attribute, depth: int) -> Any:
        """`Class.field` -> the field's default."""
        if not isinstance(node.value, ast.Name):
            return UNRESOLVED
        fields = self.classes.get(node.value.id)
        if fields and node.attr in fields:
            return self.value(fields[node.attr][1], depth + 1, node.value.id)
        return UNRESOLVED

    def _call_value(self, node: ast.Call, depth: int, cls: str | None) -> Any:
        fname = call_name(node)
        if fname in ("Field", "field"):
            return self._field_default(node, depth, cls)
        if fname == "get_args" and node.args:
            choices = self.literal_choices(node.args[0], depth + 1)
            return choices if choices is not None else UNRESOLVED
        if fname in ("list", "sorted", "tuple") and node.args:
            inner = self.value(node.args[0], depth + 1)
            if isinstance(inner, (list, tuple, dict, set)):
                return sorted(inner) if fname == "sorted" else list(inner)
        return UNRESOLVED

    def _field_default(self, node: ast.Call, depth: int, cls: str | None) -> Any:
        """`Field(default=x)` / `field(default=x)` / `Field(x)` -> x."""
        for kw in node.keywords:
            if kw.arg == "default":
                return self.value(kw.value, depth + 1, cls)
        if node.args:
            return self.value(node.args[0], depth + 1, cls)
        return UNRESOLVED

    def _sum_value(self, node: ast.BinOp, depth: int) -> Any:
        """`[a] + [b]` -> [a, b]."""
        if not isinstance(node.op, ast.Add):
            return UNRESOLVED
        left, right = self.value(node.left, depth + 1), self.value(node.right, depth + 1)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        return UNRESOLVED

    # -- choices
    def literal_choices(self, node: ast.expr | None, depth: int = 0) -> list[Any] | None:
        """Literal["a", "b"] (possibly behind a name, Optional or a Union of Literals) -> ["a", "b"]."""
        if node is None or depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.literal_choices(self.names[node.id], depth + 1)
        if isinstance(node, ast.Subscript):
            head = dotted(node.value)
            if head.endswith("Literal"):
                return self._literal_values(node, depth)
            if head.endswith(("Optional", "Union", "Annotated")):
                return self._union_choices(node, head, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            found = (self.literal_choices(node.left, depth + 1) or []) + \
                (self.literal_choices(node.right, depth + 1) or [])
            return found or None
        return None

    def _literal_values(self, node: ast.Subscript, depth: int) -> list[Any] | None:
        out = []
        for e in slice_elts(node):
            v = self.value(e, depth + 1)
            if v is not UNRESOLVED:
                out.append(v)
                continue
            sub = self.literal_choices(e, depth + 1)
            if sub is None:
                return None
            out.extend(sub)
        return out

    def _union_choices(self, node: ast.Subscript, head: str, depth: int) -> list[Any] | None:
        elts = slice_elts(node)
        if head.endswith("Annotated"):
            elts = elts[:1]
        found: list[Any] = []
        for e in elts:
            sub = self.literal_choices(e, depth + 1)
            if sub:
                found.extend(sub)
        return found or None

    # -- types
    def type_of(self, ann: ast.expr | None) -> str | None:
        """A dataclass annotation -> int | float | str | bool | json | list | None (unknown)."""
        if ann is None:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        names = set()
        for p in union_parts(ann):
            if isinstance(p, ast.Constant) and p.value is None:
                continue
            t = self._part_type(p)
            if t:
                names.add(t)
        if names == {"bool", "str"}:
            return "str"
        return next((t for t in TYPE_PRECEDENCE if t in names), None)

    def _part_type(self, p: ast.expr) -> str | None:
        """One member of a union -> its flag type."""
        subscript = isinstance(p, ast.Subscript)
        head = dotted(p.value) if subscript else dotted(p)
        if subscript and head.endswith("Annotated"):
            return self.type_of(slice_elts(p)[0])
        if subscript and head.rsplit(".", 1)[-1] in _WRAPPERS:
            return self.type_of(slice_elts(p)[0]) or "str"
        simple = _head_type(head)
        if simple:
            return simple
        if head in self.names:
            choices = self.literal_choices(self.names[head])
            return "choice" if choices else self.type_of(self.names[head]) or "str"
        return "str"


def _assigned_name(node: ast.stmt) -> tuple[str, ast.expr] | None:
    """`X = v` or `X: T = v` at module level -> (X, v)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    return None


def _head_type(head: str) -> str | None:
    """The flag type a type name says by itself, or None."""
    if head.endswith("Literal"):
        return "choice"
    if head in ("bool", "int", "float", "str"):
        return head
    if head.lower().endswith(("dict", "mapping")) or head.endswith("Config"):
        return "json"
    if head.lower().endswith(("list", "tuple", "set", "sequence")):
        return "list"
    return None
