"""One 8 MiB SSE event: the time to read it off a socket, against the time to read it and feed every read
to triage's SSE parser (target: <= 3x). Best of --repeats, both sides in the same process. Writes JSON
(default benchmarks/results/sse_parse_8mib.json)."""
from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from triage.bench.sse import SseParser  # noqa: E402

EVENT = (b'data: {"choices":[{"text":"' + b"x" * (8 * 2**20) + b'","index":0,"finish_reason":"stop"}]}\n\n'
         b"data: [DONE]\n\n")


def _once(parse: bool, read_bytes: int) -> float:
    a, b = socket.socketpair()
    sender = threading.Thread(target=lambda: (b.sendall(EVENT), b.close()))
    parser = SseParser(chat=False) if parse else None
    t0 = time.perf_counter()
    sender.start()
    while True:
        piece = a.recv(read_bytes)
        if not piece:
            break
        if parser is not None:
            parser.feed(0.0, piece)
    elapsed = time.perf_counter() - t0
    sender.join()
    a.close()
    if parser is not None:
        out = parser.finish()
        assert out.error_kind is None and out.done, out.error
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--read-bytes", type=int, default=65536)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "sse_parse_8mib.json"))
    args = ap.parse_args()
    read = min(_once(False, args.read_bytes) for _ in range(args.repeats))
    parsed = min(_once(True, args.read_bytes) for _ in range(args.repeats))
    ratio = parsed / read
    result = {"benchmark": "sse_parse_8mib", "event_bytes": len(EVENT), "read_bytes_per_recv": args.read_bytes,
              "repeats": args.repeats, "socket_read_s_best": round(read, 4), "read_and_parse_s_best": round(parsed, 4),
              "ratio": round(ratio, 2), "target_ratio_max": 3.0}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"8 MiB event: socket read {read * 1000:.1f} ms, read + parse {parsed * 1000:.1f} ms, {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
