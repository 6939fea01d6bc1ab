"""A tiny real HTTP server that replays /metrics captures (tests/fixtures/topologies/): the first scrape gets the
`before` capture, every later one the `after` capture, so a diagnose window over it has the capture's deltas.
Every other path answers 404, as a metrics-only endpoint would. Loopback only."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CAPTURES = Path(__file__).resolve().parent / "fixtures" / "topologies"


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:   # a client that hung up early is not news
        pass


class CaptureServer:
    """`before_scrapes`: how many scrapes get the `before` capture (1 for a peer, which only server_peers
    scrapes; for a diagnose target, 1 more than the scrapes of the phases before the window)."""

    def __init__(self, name: str, before_scrapes: int = 1):
        self.texts = [(CAPTURES / f"{name}.{k}.prom").read_text() for k in ("before", "after")]
        self.before_scrapes = before_scrapes
        self.scrapes = 0
        self.paths: list[str] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                with owner.lock:
                    owner.paths.append(self.path)
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                with owner.lock:
                    text = owner.texts[0 if owner.scrapes < owner.before_scrapes else 1]
                    owner.scrapes += 1
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = _Quiet(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> CaptureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
