"""Tiny HTTP helpers for probes: one base-URL normaliser and one bounded GET. Injectable in tests."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx

DEFAULT_TIMEOUT_S = 3.0
MAX_BODY_BYTES = 16 * 2**20


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status_code: int
    text: str
    headers: Mapping[str, str] = field(default_factory=dict)   # lower-cased names


class HttpFailure(Exception):
    """The request could not be made (refused, timed out, bad URL). The message says which."""


HttpGet = Callable[[str, float], HttpResponse]


def base_url(url: str) -> str:
    """'http://h:8000/v1/' -> 'http://h:8000'. A URL without a scheme gets http://."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    path = parts.path.rstrip("/")
    for suffix in ("/v1", "/metrics", "/health"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def http_get(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> HttpResponse:
    """GET with a timeout and a body-size bound; raises HttpFailure with the reason in words."""
    try:
        with httpx.Client(timeout=timeout_s, follow_redirects=True, trust_env=False) as client:
            with client.stream("GET", url) as resp:
                chunks, size = [], 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise HttpFailure(f"{url}: response larger than {MAX_BODY_BYTES} bytes")
                    chunks.append(chunk)
                body = b"".join(chunks).decode(resp.encoding or "utf-8", errors="replace")
                return HttpResponse(resp.status_code, body, {k.lower(): v for k, v in resp.headers.items()})
    except httpx.TimeoutException:
        raise HttpFailure(f"{url}: no answer within {timeout_s:g} s") from None
    except httpx.ConnectError as e:
        raise HttpFailure(f"{url}: cannot connect ({e})") from None
    except (httpx.HTTPError, ValueError) as e:
        raise HttpFailure(f"{url}: {type(e).__name__}: {e}") from None
