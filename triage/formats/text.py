"""`--format text`: the rich view for people (compare: its compact verdict table; coldstart: its phase table)."""
from __future__ import annotations

import sys

from triage import render
from triage.coldstart.writers import COLDSTART, write_text
from triage.core.report import ReportKind
from triage.formats import Format, Output, register


def _view(out: Output) -> None:
    options = out.detail if isinstance(out.detail, render.ViewOptions) else render.ViewOptions()
    render.console_view(out.report, out.screen, verbose=options.verbose)


def _compare(out: Output) -> None:
    from triage.compare.text_view import render_text

    view = out.detail
    sys.stdout.write(render_text(view.result, out.screen.width, view.base, view.cand))


register(Format("text", {**{kind: _view for kind in ReportKind}, ReportKind.COMPARE: _compare,
                         COLDSTART: write_text}, human=True, rank=0))
