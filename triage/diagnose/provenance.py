"""Whether what diagnose judges is about the server being diagnosed.

- A `--bench` file must be a bench report, a `--baseline` file a bench or plan report: any other kind is
  refused with what it is.
- A bench or baseline recorded against another server (its URL, model or engine differ from the target's)
  still feeds the rules, but each finding that rests on it says where it came from and drops to "possible".
- A target that answers HTTP but no inference route is not an inference server: the diagnosis says so
  instead of "no problems found".
"""
from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

from triage.core.errors import UsageError
from triage.core.probe_data import EngineIdentityData, ServerConfigData, ServerMetricsData
from triage.core.report import Certainty, Finding, Report, ReportKind, Target
from triage.core.snapshot import Snapshot
from triage.engines import GENERIC

LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}
# Evidence from the diagnosed server itself (not from a saved report handed in).
OWN_MEASUREMENTS = ("server_metrics.", "logs.", "prometheus_history.")
# Where server_config found a setting when the server itself answered (not the command line or a default).
_ANSWERED = ("/", "cache_config_info")


def check_kind(report: Report, flag: str, path: object, wanted: tuple[ReportKind, ...]) -> Report:
    """The report, when it is of a kind `flag` takes; else a UsageError that says what it is instead."""
    if report.kind in wanted:
        return report
    names = " or ".join(k.value for k in wanted)
    how = {ReportKind.BENCH: "triage bench --json FILE", ReportKind.PLAN: "triage plan --json FILE"}
    raise UsageError(f"{flag} {path}: this is a {report.kind.value} report; {flag} takes a {names} report "
                     f"({', '.join(how[k] for k in wanted if k in how)} writes one)")


def _endpoint(url: str | None) -> tuple[str, int | None] | None:
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = (parts.hostname or "").lower()
    return ("loopback" if host in LOOPBACK else host), parts.port or (443 if parts.scheme == "https" else 80)


def _engine(name: str | None) -> str | None:
    return None if name in (None, GENERIC) else name


def differences(recorded: Report, target: Target) -> list[str]:
    """How the server a saved report measured differs from the one diagnosed (nothing where either is unknown)."""
    out = []
    urls = [u for u in (recorded.target.urls or (recorded.target.url,)) if u]
    if target.url and urls and _endpoint(target.url) not in {_endpoint(u) for u in urls}:
        out.append(f"URL {urls[0]}, not {target.url}")
    model = recorded.target.model or (recorded.bench.config.model if recorded.bench else None)
    if model and target.model and model != target.model:
        out.append(f"model {model}, not {target.model}")
    engine, theirs = _engine(recorded.target.engine), _engine(target.engine)
    if engine and theirs and engine != theirs:
        out.append(f"engine {engine}, not {theirs}")
    return out


def _rests_on(finding: Finding, source: str) -> bool:
    """Whether a finding rests on `source` ("bench", "baseline"): its evidence reads it, or its rule cannot
    run without it."""
    from triage.rules import REGISTRY

    rule = next((r for r in REGISTRY if r.code == finding.code), None)
    return any(k.startswith(f"{source}.") for k in finding.evidence) or (
        rule is not None and source in rule.inputs)


def _own_evidence(finding: Finding) -> bool:
    """Whether the diagnosed server's own measurements (its /metrics, its log, its history) support it too."""
    return any(k.startswith(OWN_MEASUREMENTS) for k in finding.evidence)


def weigh(findings: tuple[Finding, ...], recorded: Report | None, target: Target, source: str,
          what: str) -> tuple[Finding, ...]:
    """Findings resting on `source` ("bench", "baseline"), a report of another server, say where that evidence
    came from; those the server's own measurements do not support too drop to "possible"."""
    if recorded is None:
        return findings
    diff = differences(recorded, target)
    if not diff:
        return findings
    note = f" (The {what} was recorded against another server: {'; '.join(diff)}."
    out = []
    for f in findings:
        if not _rests_on(f, source):
            out.append(f)
        elif _own_evidence(f):
            out.append(dataclasses.replace(f, message=f"{f.message}{note} This server's own metrics support "
                                                      "the finding.)"))
        else:
            out.append(dataclasses.replace(f, certainty=Certainty.POSSIBLE, message=f"{f.message}{note} It may "
                                           "not describe this one: record it against this server to confirm.)"))
    return tuple(out)


def not_inference_server(snapshot: Snapshot, url: str | None) -> str | None:
    """Why `url` is not an LLM inference server, or None: it answered none of the routes every engine triage
    knows serves (/v1/models, /version, /metrics with serving metrics, an engine's own info endpoint)."""
    if not url:
        return None
    config = snapshot.payload(ServerConfigData)
    metrics = snapshot.get("server_metrics")
    ident = snapshot.payload(EngineIdentityData)
    answered = config is not None and any(str(src).startswith(_ANSWERED) for src in config.sources.values())
    serving_metrics = metrics is not None and metrics.ok and snapshot.payload(ServerMetricsData) is not None
    reached = any(p.ok for p in (snapshot.get("network"),) if p is not None)
    if answered or serving_metrics or not reached or (ident is not None and ident.engine):
        return None
    return (f"{url} answered, but none of the routes an inference server serves (/v1/models, /version, "
            "/metrics with serving metrics, an engine's own info endpoint): it is not an LLM inference server. "
            "Point --url at the engine's own port")
