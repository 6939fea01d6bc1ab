"""Several replicas in one bench run (`--url A --url B`, or `--urls FILE`).

FleetPool spreads requests over one connection pool per replica: `round-robin` (the next replica in turn) or
`least-in-flight` (the replica with the fewest of this client's requests open, ties in turn). Each record
carries its replica's index. Each level then gets, per replica, its own latency and throughput from that
replica's records, its own /metrics window and its own client-vs-server TTFT reconciliation
(`level.replicas`), and the report a fleet summary (`bench.summary.fleet`). Rule FLEET001 judges imbalance.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from triage.bench.http import HttpError, Response
from triage.bench.pool import ConnectEvent, ConnectionPool
from triage.bench.records import RequestRecord
from triage.bench.run_config import LevelSpec
from triage.bench.stats import summarize
from triage.core.bench_data import Replica, ReplicaLatency
from triage.core.errors import UsageError
from triage.core.redact import redact_text
from triage.core.report import BenchLevel, ClientStats, level_name

BALANCES = ("round-robin", "least-in-flight")


def read_urls(urls: list[str] | None, urls_file: Any) -> list[str]:
    """--url (repeatable) then the lines of --urls FILE (blank lines and # comments skipped), de-duplicated."""
    out = list(urls or [])
    if urls_file is not None:
        try:
            lines = urls_file.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise UsageError(f"--urls {urls_file}: {e.strerror or e}") from None
        # A comment starts a line or follows white space: `http://h:8000#prefill` keeps its role fragment.
        kept = [re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip() for line in lines]
        out += [line for line in kept if line]
        if not out:
            raise UsageError(f"--urls {urls_file}: no URL in the file")
    return list(dict.fromkeys(out))


def split_roles(urls: list[str]) -> tuple[list[str], tuple[str | None, ...]]:
    """(the URLs without their `#role` fragments, each one's role or None): a fragment is never sent to the
    server; it names the instance's role in a disaggregated deployment (docs/TOPOLOGIES.md)."""
    from triage.probes.server_peers import split_role

    out, roles = [], []
    for url in urls:
        try:
            base, role = split_role(url)
        except ValueError as e:
            raise UsageError(str(e)) from None
        out.append(base)
        roles.append(role)
    return out, tuple(roles)


class FleetPool:
    """The ConnectionPool interface over one pool per replica."""

    def __init__(self, pools: list[ConnectionPool], balance: str = "round-robin"):
        if balance not in BALANCES:
            raise UsageError(f"--balance {balance!r}: use {' or '.join(BALANCES)}")
        self.pools, self.balance = pools, balance
        self.in_flight = [0] * len(pools)
        self._next = 0

    def _pick(self) -> int:
        n = len(self.pools)
        order = [(self._next + k) % n for k in range(n)]
        choice = order[0] if self.balance == "round-robin" else min(order, key=lambda i: self.in_flight[i])
        self._next = (choice + 1) % n
        return choice

    async def post_stream(self, path: str, body: bytes, read_timeout_s: float,
                          on_piece: Callable[[float, bytes], None] | None = None,
                          headers: dict[str, str] | None = None) -> Response:
        i = self._pick()
        self.in_flight[i] += 1
        try:
            response = await self.pools[i].post_stream(path, body, read_timeout_s, on_piece=on_piece, headers=headers)
        except HttpError as e:
            e.replica = i  # type: ignore[attr-defined]
            raise
        finally:
            self.in_flight[i] -= 1
        response.replica = i
        return response

    async def warm(self, num_connections: int) -> list[HttpError]:
        share = -(-num_connections // len(self.pools))
        results = await asyncio.gather(*(p.warm(share) for p in self.pools))
        return [e for errors in results for e in errors]

    @property
    def connects(self) -> list[ConnectEvent]:
        return sorted((c for p in self.pools for c in p.connects), key=lambda c: c.at_s)

    @property
    def retries(self) -> list[float]:
        return sorted(t for p in self.pools for t in p.retries)

    @property
    def kernel_stamps(self) -> bool:
        return all(p.kernel_stamps for p in self.pools)

    @property
    def max_connections(self) -> int:
        return sum(p.max_connections for p in self.pools)

    def num_idle(self) -> int:
        return sum(p.num_idle() for p in self.pools)

    def close(self) -> None:
        for p in self.pools:
            p.close()


def replica_stats(spec: LevelSpec, records: list[RequestRecord], urls: list[str], slo: dict[str, float] | None,
                  client: ClientStats, scrapers: list[Any], roles: tuple[str | None, ...] = ()) -> tuple[Replica, ...]:
    """One entry per replica: its records' latencies and throughput, its own server window (`scrapers[i]`
    scraped replica i's /metrics) reconciled with that replica's client TTFT, and its role (its URL's
    `#fragment`, else what its /metrics labels name)."""
    out = []
    for i, url in enumerate(urls):
        mine = [r for r in records if r.replica == i]
        lv = summarize(spec, mine, slo, client, keep_samples=False)
        server, cache = (scrapers[i].summary(lv.ttft_ms.mean)[0], scrapers[i].cache_config()) \
            if i < len(scrapers) else (None, {})
        role = (roles[i] if i < len(roles) else None) or (server.role if server is not None else None)
        out.append(Replica(
            replica=i, url=redact_text(url), role=role, requests=lv.requests.completed + lv.requests.failed,
            failed=lv.requests.failed, ttft_ms=ReplicaLatency(p50=lv.ttft_ms.p50, p99=lv.ttft_ms.p99,
                                                              mean=lv.ttft_ms.mean),
            tpot_ms=ReplicaLatency(p50=lv.tpot_ms.p50, p99=lv.tpot_ms.p99), e2e_ms=ReplicaLatency(p99=lv.e2e_ms.p99),
            output_tokens_per_s=lv.output_tokens_per_s, slo_attainment_pct=lv.slo_attainment_pct,
            server=server, cache_config=cache or None))
    return tuple(out)


def fleet_summary(levels: list[BenchLevel], urls: list[str], balance: str) -> dict[str, Any]:
    """Per replica over the whole run: its share of requests and its worst level's TTFT p99."""
    rows = []
    for i, url in enumerate(urls):
        per = [(lv, r) for lv in levels for r in (lv.replicas or ()) if r.replica == i]
        p99s = [(r.ttft_ms.p99, level_name(lv)) for lv, r in per if r.ttft_ms is not None and r.ttft_ms.p99 is not None]
        roles = {r.role for _, r in per if r.role}
        rows.append({"replica": i, "url": redact_text(url), "role": roles.pop() if len(roles) == 1 else None,
                     "requests": sum(r.requests or 0 for _, r in per), "failed": sum(r.failed or 0 for _, r in per),
                     "ttft_ms_p99_worst": max(p for p, _ in p99s) if p99s else None,
                     "worst_level": max(p99s)[1] if p99s else None})
    return {"balance": balance, "replicas": rows}
