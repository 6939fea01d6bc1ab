"""Per-request records: what the client saw for one request, and the JSONL file they are flushed to as each
request finishes (so a crash or SIGKILL keeps every completed request)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from triage.core.errors import UsageError


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request. Times are seconds; `t0_s` is relative to the run's start, the others to `t0_s`.

    `chunk_times_s` holds the arrival time of every content chunk (text or reasoning). `chunk_tokens` holds
    the tokens each chunk carried when the server reported per-chunk usage, else None.
    """

    level: str
    repeat: int
    index: int
    warmup: bool
    t0_s: float
    slot_wait_s: float
    ttft_s: float | None = None
    e2e_s: float | None = None
    end_s: float | None = None  # when the request finished, success or failure
    input_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: str | None = None  # "usage" | "chunks"
    requested_output_tokens: int | None = None
    chunk_times_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] | None = None
    num_reasoning_chunks: int = 0
    http_status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    # Connection setup before t0 (0 on a reused connection), whether this request opened a connection, and
    # whether it was sent again on a fresh connection after a dead reused one swallowed it (pool.py).
    connect_s: float = 0.0
    new_connection: bool = False
    retried: bool = False
    # Identity: the id sent in the request-id header, and wall-clock (epoch seconds) times of the write that got
    # the response, of the first content chunk and of the end, to join with a server's own logs.
    request_id: str | None = None
    send_epoch_s: float | None = None
    first_token_epoch_s: float | None = None
    end_epoch_s: float | None = None
    # Reasoning models: first reasoning_content chunk and first answer chunk, from t0 (TTFT is the earlier).
    ttft_reasoning_s: float | None = None
    ttft_answer_s: float | None = None
    # Multi-turn: the conversation and its turn (1-based); trace replay: the trace line (1-based).
    conversation: int | None = None
    turn: int | None = None
    trace_line: int | None = None
    # Several --url: the index of the replica the request went to (fleet.py).
    replica: int | None = None
    # The server finished normally and usage says it generated tokens, but no chunk carried text: a success with
    # no TTFT and no ITL (its e2e is the end of the stream; its tokens come from usage).
    no_text: bool = False

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def to_json(self) -> str:
        data: dict[str, Any] = asdict(self)
        data["chunk_times_s"] = [round(t, 6) for t in self.chunk_times_s]
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> RequestRecord:
        data = json.loads(line)
        known = cls.__dataclass_fields__  # type: ignore[attr-defined]
        return cls(**{k: v for k, v in data.items() if k in known})


class RecordSink:
    """Appends records to a JSONL file, one line each, flushed to the kernel as each request finishes.

    A flush is enough for a crash of this process (SIGKILL included): the data is in the page cache.
    """

    def __init__(self, path: Path | None):
        self.path = path
        self._file: IO[str] | None = None
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            except OSError as e:
                raise UsageError(f"--jsonl {path}: cannot write it ({e.strerror or e})") from None

    def write(self, record: RequestRecord) -> None:
        if self._file is None:
            return
        self._file.write(record.to_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RecordSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: Path) -> list[RequestRecord]:
    """Every complete line of a records file (a torn last line, from a kill mid-write, is skipped)."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(RequestRecord.from_json(line))
        except (ValueError, TypeError):
            continue
    return records
