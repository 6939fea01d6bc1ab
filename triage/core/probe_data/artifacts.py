"""The `artifacts` probe: what `diagnose --from` was handed (a ticket's files and the blocks of an issue body),
each with what it was recognised as and what it supplied, or why it was not read."""
from __future__ import annotations

from triage.core.probe_data.base import Payload, payload


@payload
class ArtifactRead:
    source: str | None = None           # "issue.md block 3 (lines 40-95)", "nvidia-smi.txt"
    kind: str | None = None             # metrics | nvidia-smi-q | nvidia-smi-xml | nvidia-smi | collect-env | command
                                        # | log | unread
    supplied: tuple[str, ...] = ()      # the probes it filled (server_metrics, gpu, ...)
    note: str | None = None             # what it gives less of than the live probe, or (unread) its first line


@payload
class ArtifactsData(Payload):
    PROBE = "artifacts"

    items: tuple[ArtifactRead, ...] = ()
