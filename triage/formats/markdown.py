"""`--format markdown`: the report as Markdown, for pull requests and CI summaries."""
from __future__ import annotations

import sys

from triage import render
from triage.coldstart.writers import COLDSTART, write_markdown
from triage.core.report import ReportKind
from triage.formats import Format, Output, register


def _write(out: Output) -> None:
    sys.stdout.write(render.markdown(out.report))


# compare lists markdown before json: its verdict goes on pull requests and CI summaries.
register(Format("markdown", {**{kind: _write for kind in ReportKind}, COLDSTART: write_markdown}, rank=2,
                rank_for={ReportKind.COMPARE: 0.5}))
