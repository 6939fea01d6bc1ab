"""`triage diagnose --bundle`: report, snapshot and the redacted server log in one .tar.gz for a ticket."""
from __future__ import annotations

import io
import json
import os
import tarfile
import time
from pathlib import Path

from triage.core.errors import ReportError
from triage.core.redact import redact_text
from triage.diagnose.pipeline import DiagnoseResult


def write_bundle(path: str | os.PathLike[str], result: DiagnoseResult, log_path: str | None = None,
                 max_log_bytes: int = 16 * 2**20) -> Path:
    """report.json, snapshot.json, the redacted log tail and a README, in one .tar.gz."""
    from triage.core.report_io import dumps, to_dict
    from triage.probes.logs import read_tail

    out = Path(path)
    files: dict[str, str] = {
        "report.json": dumps(result.report),
        "snapshot.json": json.dumps({"window_s": result.snapshot.window_s,
                                     "probes": to_dict(list(result.snapshot.probes))}, indent=2) + "\n",
    }
    if log_path:
        try:
            lines, truncated = read_tail(log_path, max_log_bytes)
            head = f"# last {max_log_bytes} bytes of {log_path}, redacted\n" if truncated else ""
            files["logs/server.log"] = head + "\n".join(redact_text(line) for line in lines) + "\n"
        except OSError as e:
            files["logs/README.txt"] = f"the log {log_path} could not be read: {e}\n"
    files["README.txt"] = (
        "triage diagnose bundle\n"
        f"created: {result.report.created_at}\n"
        f"target: {result.report.target.url or 'none'} ({result.report.target.engine or 'unknown engine'})\n"
        "report.json   the diagnose report (probes, findings)\n"
        "snapshot.json the probe snapshot; replay with: triage diagnose --from snapshot.json\n"
        "logs/         the server log tail, with secrets redacted\n"
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz") as tar:
            for name, text in files.items():
                blob = text.encode("utf-8")
                info = tarfile.TarInfo(f"triage-bundle/{name}")
                info.size = len(blob)
                info.mtime = int(time.time())
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(blob))
    except OSError as e:
        raise ReportError(f"{out}: cannot write the bundle ({e})") from None
    return out
