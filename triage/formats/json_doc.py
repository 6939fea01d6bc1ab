"""`--format json`: the report JSON on stdout, exactly as `--json FILE` writes it."""
from __future__ import annotations

import sys

from triage.coldstart.writers import COLDSTART, write_json
from triage.core.report import ReportKind
from triage.core.report_io import dumps
from triage.formats import Format, Output, register


def _write(out: Output) -> None:
    sys.stdout.write(dumps(out.report))


register(Format("json", {**{kind: _write for kind in ReportKind}, COLDSTART: write_json}, rank=1))
