"""`diagnose --url A --url B ...`: the first URL is the target, the rest are the deployment's other instances
(probes/server_peers.py). A URL may end in '#prefill', '#decode' or '#both' to name its role; a fragment is
never sent to the server."""
from __future__ import annotations

from collections.abc import Sequence

from triage.core.errors import UsageError
from triage.probes.server_peers import split_role


def split_urls(urls: Sequence[str] | None) -> tuple[str | None, str | None, tuple[str, ...]]:
    """(target URL without its fragment, the target's role or None, the peers' URLs as given)."""
    if not urls:
        return None, None, ()
    try:
        target, role = split_role(urls[0])
        for peer in urls[1:]:
            split_role(peer)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if len(set(urls)) != len(urls):
        raise UsageError("--url: the same URL is given twice")
    return target, role, tuple(urls[1:])
