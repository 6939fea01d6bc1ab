"""The TriageError hierarchy. Every error a user can cause or meet is one of these: the CLI funnel
(triage/cli_support.py) turns it into one line on stderr and the contract's exit code."""
from __future__ import annotations

EXIT_OK = 0
EXIT_GATE = 1          # a finding at or above --fail-on, or a regression in compare
EXIT_CANNOT = 2        # triage could not do the job
EXIT_INTERRUPTED = 130


class TriageError(Exception):
    """Triage could not do the job. The message says what happened and what to do next."""

    exit_code = EXIT_CANNOT


class UsageError(TriageError):
    """Bad arguments or options."""


class ReportError(TriageError):
    """A report that cannot be read, parsed, or compared (schema mismatch, different model, ...)."""


class TargetUnreachable(TriageError):
    """A server that was required could not be reached."""


class EngineError(TriageError):
    """The bundled reference engine could not start or run."""


class MissingExtra(TriageError):
    """A command needs an optional dependency group that is not installed."""


def require_extra(extra: str, what: str) -> None:
    """Raise MissingExtra, with the exact pip line, when `extra`'s packages are not installed."""
    from triage.core import extras

    absent = extras.missing(extra)
    if absent:
        raise MissingExtra(f"{what} needs the '{extra}' extra ({', '.join(absent)} not installed): "
                           f"{extras.install_line(extra)}")
