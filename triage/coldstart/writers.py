"""`triage coldstart`'s entries in the formats registry (triage/formats/): its report is a dict, not a
`triage.core.report.Report`, so it goes through `write()` wrapped in a `ColdstartDoc` whose `kind` is
`COLDSTART`, the key each format's writers hold it under."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass

COLDSTART = "coldstart"   # the report kind in the formats registry (`names_for(COLDSTART)`, `format_option`)


@dataclass(frozen=True)
class ColdstartDoc:
    """What `triage.formats.Output.report` holds for a coldstart report: the dict, and the kind to look up."""
    data: dict
    kind: str = COLDSTART


def dumps(report: dict) -> str:
    """The report JSON, as `--json FILE` and `--format json` write it."""
    return json.dumps(report, indent=1) + "\n"


def write_text(out) -> None:
    from triage.coldstart.view import render_text

    sys.stdout.write(render_text(out.report.data, out.screen.width))


def write_json(out) -> None:
    sys.stdout.write(dumps(out.report.data))


def write_markdown(out) -> None:
    from triage.coldstart.view import render_markdown

    sys.stdout.write(render_markdown(out.report.data))
