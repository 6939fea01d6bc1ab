"""Redaction of secrets from argv, environments and free text. Nothing triage writes may carry a key."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "***"

# Flags whose value is a secret: --api-key X, --api-key=X, --hf-token, --token, --password ...
# "token" but not "tokens": --max-num-batched-tokens, --max-total-tokens are counts the rules need.
_SECRET_FLAG = re.compile(r"^--?[\w-]*(api[-_]?key|token(?!s)|secret|password|passwd|auth)[\w-]*$", re.I)
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_SECRET_TEXT = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)((?:api[-_]?key|token|secret|password)\s*[=:]\s*)\S+"),
    re.compile(r"(\b[a-zA-Z][\w+.-]*://)[^/\s:@]+(?::[^/\s@]+)?(?=@)"),   # scheme://user[:password]@host
]


# Header names whose value is a secret: Authorization, Proxy-Authorization, Cookie, X-Api-Key, X-Auth-Token ...
_SECRET_HEADER = re.compile(r"(auth|key|token|secret|cookie|password)", re.I)
_HEADER_FLAG = "--header"


def redact_header(name: str, value: str) -> str:
    """A header's value as it may be written: masked whole when the header's name says it is a secret."""
    return REDACTED if _SECRET_HEADER.search(name) else redact_text(value)


def _redact_header_arg(text: str) -> str:
    """`NAME:VALUE` (the value of --header) with the value masked when NAME is secret-like."""
    name, sep, value = text.partition(":")
    if sep and _SECRET_HEADER.search(name):
        return f"{name}{sep} {REDACTED}"
    return redact_text(text)


def redact_argv(argv: Iterable[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    header_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if header_next:
            out.append(_redact_header_arg(arg))
            header_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if flag == _HEADER_FLAG:
            if eq:
                out.append(f"{flag}={_redact_header_arg(_value)}")
            else:
                out.append(arg)
                header_next = True
            continue
        if _SECRET_FLAG.match(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_text(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if _SECRET_ENV.search(k) else redact_text(v)) for k, v in env.items()}


# Secret forms that server logs print: vLLM's startup line "non-default args: {'api_key': '...',
# 'hf_token': '...'}", JSON ("api_key": "..."), Namespace lists (api_key=['a', 'b']) and an echoed
# command line (--api-key VALUE).
_SECRET_KEY = r"(?:api[-_]?keys?|[\w-]*token|secret|password|passwd)"
_QUOTED_SECRET = re.compile(r"""(?i)(['"]""" + _SECRET_KEY + r"""['"]\s*[:=]\s*)(\[[^\]]*\]|'[^']*'|"[^"]*")""")
_LIST_SECRET = re.compile(r"(?i)(\b" + _SECRET_KEY + r"\s*=\s*)\[[^\]]*\]")
_FLAG_SECRET = re.compile(r"(?i)(--?[\w-]*(?:api[-_]?key|token|secret|password|passwd)(?![\w-])\s+)(?!-)\S+")


def redact_text(text: str) -> str:
    """Free text (a log line, an error message) with every secret we know the shape of replaced."""
    text = _QUOTED_SECRET.sub(lambda m: m.group(1) + "'***'", text)
    text = _LIST_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    text = _FLAG_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    for pattern in _SECRET_TEXT:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


# Host names and addresses (`--redact-hosts`): a URL's host, an IPv4 address, a `--host` value and NCCL's
# `host:pid:tid` line prefix. The loopback and wildcard addresses say nothing about a deployment and stay.
_KEEP_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::", "::1"}
_HOST_FORMS = [
    re.compile(r"(\b[a-z][a-z0-9+.-]*://)([^/\s:@\]]+)", re.I),
    re.compile(r"(--host[= ])([^\s]+)"),
    re.compile(r"(^|\]\s|\s)([A-Za-z][\w.-]*)(?=:\d+:\d+ )", re.M),
    re.compile(r"()(\b(?:\d{1,3}\.){3}\d{1,3}\b)"),
]


class HostRedactor:
    """Replaces each host name or address with `host-N`, the same N for the same host across every text."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, host: str) -> str:
        if host.lower() in _KEEP_HOSTS:
            return host
        return self.names.setdefault(host, f"host-{len(self.names) + 1}")

    def __call__(self, text: str) -> str:
        for pattern in _HOST_FORMS:
            text = pattern.sub(lambda m: m.group(1) + self._name(m.group(2)), text)
        return text
