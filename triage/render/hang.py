"""Hanging indents for the text view: a long line wraps to the console's width and its continuation lines
start under the text they continue, never at column 0."""
from __future__ import annotations

from rich.console import Console
from rich.text import Text

MIN_TEXT_WIDTH = 24   # below this a narrow terminal gets the text at its own width rather than a sliver


def hang(out: Console, body: Text | str, first: Text | str = "", indent: int | None = None) -> None:
    """Print `first` then `body`, wrapped at the console's width; continuation lines are indented by
    `indent` (default: the width of `first`, so they line up under the body's first character)."""
    lead = first if isinstance(first, Text) else Text(first)
    indent = lead.cell_len if indent is None else indent
    text = body if isinstance(body, Text) else Text(body)
    room = out.width - max(indent, lead.cell_len)
    if room < MIN_TEXT_WIDTH:
        indent, room = min(indent, 2), max(out.width - 2, 1)
    for i, line in enumerate(text.wrap(out, room, overflow="fold")):
        line.rstrip()
        out.print(Text.assemble(lead if i == 0 else " " * indent, line), soft_wrap=True)
