"""`--format junit`: compare's verdicts as JUnit XML, one test case per metric and level."""
from __future__ import annotations

import sys

from triage.core.report import ReportKind
from triage.formats import Format, Output, register


def _write(out: Output) -> None:
    from triage.compare.section import junit

    sys.stdout.write(junit(out.detail.result))


register(Format("junit", {ReportKind.COMPARE: _write}, announces_files=False, rank=3))
