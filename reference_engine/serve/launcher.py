"""Start `triage serve` in a child process and hand back its URL: the embedded default server.

`triage bench` with no --url, `triage diagnose` tests and our own tests use this. The child runs in
its own process group on a free loopback port; it is stopped (SIGTERM, then SIGKILL) when the
handle is closed, when the `with` block ends, or when this interpreter exits.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from triage.core.errors import EngineError
from triage.core.redact import redact_text

PACKAGE_ROOT = Path(__file__).resolve().parents[2]   # the repository root: reference_engine/serve/launcher.py
DEFAULT_STARTUP_TIMEOUT_S = 180.0
_BIND_RETRIES = 3
_LIVE: set[ServerHandle] = set()
_LIVE_LOCK = threading.Lock()


@dataclass(eq=False)
class ServerHandle:
    """A running reference server. Use it as a context manager, or call stop()."""

    url: str
    host: str
    port: int
    process: subprocess.Popen
    argv: tuple[str, ...]
    log_path: Path
    api_key: str | None = None
    keep_log: bool = False
    _stopped: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """Stop the server (SIGTERM to its process group, SIGKILL after timeout_s); returns its exit code."""
        if self._stopped:
            return self.process.returncode
        self._stopped = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        code = _terminate(self.process, timeout_s)
        if not self.keep_log:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
        return code

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_reference_server(model: str = "tiny", extra_args: Sequence[str] = (), host: str = "127.0.0.1",
                           port: int | None = None,
                           startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
                           env: Mapping[str, str] | None = None, api_key: str | None = None,
                           keep_log: bool = False) -> ServerHandle:
    """Spawn `python -m triage serve --model MODEL ...` and wait until /health answers 200.

    port None or 0 picks a free port. `api_key` reaches the server through TRIAGE_API_KEY (never its
    command line); keys inherited from this process's environment are not passed on, so the
    embedded server is open unless asked. Raises EngineError, with the tail of the server's log,
    when it exits or does not become healthy within startup_timeout_s.
    """
    pick_port = not port
    last_error: EngineError | None = None
    for _ in range(_BIND_RETRIES if pick_port else 1):
        chosen = _free_port(host) if pick_port else int(port)
        try:
            return _start_once(model, tuple(extra_args), host, chosen, startup_timeout_s, env, api_key,
                               keep_log)
        except _PortTaken as e:
            last_error = EngineError(str(e))
    raise last_error or EngineError("could not start the reference server")


class _PortTaken(EngineError):
    pass


class _NotHealthy(EngineError):
    """The child exited or did not answer /health in time."""


def _start_once(model: str, extra_args: tuple[str, ...], host: str, port: int, startup_timeout_s: float,
                env: Mapping[str, str] | None, api_key: str | None, keep_log: bool) -> ServerHandle:
    argv = (sys.executable, "-m", "triage", "serve", "--model", model, "--host", host,
            "--port", str(port), *extra_args)
    child_env = _child_env(env, api_key)
    fd, log_name = tempfile.mkstemp(prefix="triage-serve-", suffix=".log")
    log_path = Path(log_name)
    with os.fdopen(fd, "wb") as log_file:
        try:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=subprocess.STDOUT, env=child_env,
                                       start_new_session=True)
        except OSError as e:
            raise EngineError(f"could not run {sys.executable}: {e}") from None
    url_host = f"[{host}]" if ":" in host else host
    handle = ServerHandle(url=f"http://{url_host}:{port}", host=host, port=port, process=process,
                          argv=argv, log_path=log_path, api_key=api_key, keep_log=keep_log)
    with _LIVE_LOCK:
        _LIVE.add(handle)
    try:
        _wait_healthy(handle, startup_timeout_s)
    except BaseException as exc:
        exit_code = handle.process.poll()   # None: still running, so it timed out (or we were interrupted)
        handle.keep_log = True               # read its tail first, then remove it
        handle.stop(timeout_s=5)
        if not isinstance(exc, _NotHealthy):  # Ctrl-C or a bug: stop the child, then let it propagate
            with contextlib.suppress(OSError):
                log_path.unlink()
            raise
        tail = _tail(log_path, 40)
        with contextlib.suppress(OSError):
            log_path.unlink()
        if "cannot listen on" in tail:
            raise _PortTaken(f"port {port} was taken before the server could bind it") from None
        raise EngineError(_failure_message(handle, exit_code, tail, startup_timeout_s)) from None
    return handle


def _wait_healthy(handle: ServerHandle, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while True:
            if handle.process.poll() is not None:
                raise _NotHealthy("exited")
            try:
                if client.get(f"{handle.url}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise _NotHealthy("timeout")
            time.sleep(0.1)


def _failure_message(handle: ServerHandle, exit_code: int | None, tail: str, timeout_s: float) -> str:
    what = (f"exited with code {exit_code}" if exit_code is not None
            else f"did not answer {handle.url}/health within {timeout_s:.0f} s")
    tail_text = redact_text(tail.strip()) or "(no output)"
    return (f"the reference server {what}. Its last output:\n{tail_text}\n"
            f"Run `triage {' '.join(handle.argv[3:])}` yourself to see the whole log.")


def _child_env(env: Mapping[str, str] | None, api_key: str | None) -> dict[str, str]:
    child = dict(os.environ)
    for name in ("TRIAGE_API_KEY", "VLLM_API_KEY"):
        child.pop(name, None)
    if env:
        child.update(env)
    if api_key:
        child["TRIAGE_API_KEY"] = api_key
    paths = [str(PACKAGE_ROOT), *filter(None, child.get("PYTHONPATH", "").split(os.pathsep))]
    child["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    child["PYTHONUNBUFFERED"] = "1"
    child.setdefault("NO_COLOR", "1")
    return child


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _terminate(process: subprocess.Popen, timeout_s: float) -> int | None:
    if process.poll() is not None:
        return process.returncode
    _signal_group(process, signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        try:
            return process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, sig)   # start_new_session made the child its group's leader
        else:
            process.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path, num_lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-num_lines:])


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        handles = list(_LIVE)
    for handle in handles:
        handle.stop(timeout_s=5)
