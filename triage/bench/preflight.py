"""Before the load: check the server answers, pick the model, learn max_model_len, whether the optional
request fields are accepted, whether usage is reported, and how many tokens a prompt word is (calibration).

A calibration that fails is a warning in the table and the report, never a silent guess: a prompt sized with
the wrong tokens-per-word can come out several times longer than --input-len asked.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from triage.bench.client import RequestOptions, send
from triage.bench.pool import ConnectionPool
from triage.bench.prompts import PromptItem, TokenCalibration
from triage.bench.records import RequestRecord
from triage.bench.run_config import BenchConfig
from triage.core.errors import TargetUnreachable, UsageError

PROBE_WORDS = (16, 80)  # two prompt sizes for the tokens-per-word fit


@dataclass(slots=True)
class ServerInfo:
    model: str
    max_model_len: int | None = None
    owned_by: str | None = None
    engine_version: str | None = None
    send_ignore_eos: bool = True
    continuous_usage: bool = True
    usage_reported: bool | None = None
    calibration: TokenCalibration = field(default_factory=TokenCalibration)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # shown in the table and the report, not only noted


def _unreachable(url: str, exc: BaseException) -> TargetUnreachable:
    return TargetUnreachable(f"cannot reach the server at {url} ({type(exc).__name__}: {exc}). Is it running? "
                             "Check --url, or leave --url out to benchmark the bundled reference engine.")


async def _server_version(client: httpx.AsyncClient) -> str | None:
    """vLLM and the reference server answer /version with {"version": ...}; others may not."""
    try:
        resp = await client.get("/version")
        version = resp.json().get("version") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return str(version) if version else None


async def preflight(client: httpx.AsyncClient, pool: ConnectionPool, cfg: BenchConfig) -> ServerInfo:
    """Check the server answers, pick the model, learn max_model_len, whether ignore_eos/min_tokens are
    accepted, whether usage is reported, and how many tokens a prompt word is."""
    info = await _server_info(client, cfg)
    opts = RequestOptions(endpoint=cfg.endpoint, model=info.model, request_id_header=cfg.request_id_header)
    epoch = time.perf_counter()
    prompts = [PromptItem(index=i, prompt=" ".join(["hello"] * w), output_tokens=2)
               for i, w in enumerate(PROBE_WORDS)]
    first = await _probe(pool, prompts[0], opts, epoch, cfg.timeout_s)
    if first.error_kind in ("connection_refused", "connect_error", "connect_timeout"):
        raise TargetUnreachable(f"cannot reach the server at {cfg.url}: {first.error}")
    if first.error_kind in ("http_401", "http_403"):
        raise TargetUnreachable(f"{cfg.url} refused a {cfg.endpoint.value} request ({first.error}): pass --api-key "
                                "or set OPENAI_API_KEY (or the --header your gateway expects)")
    if first.error_kind in ("http_400", "http_422"):
        first, opts = await _without_extras(pool, prompts[0], opts, first, info, cfg, epoch)
    if not first.ok:
        info.warnings.append(f"prompt calibration failed: the capability probe got {first.error_kind} "
                             f"({first.error}); prompt lengths assume 1 token per word and may be far from "
                             "--input-len (ignore_eos/min_tokens and usage assumed supported)")
        return info
    info.usage_reported = first.input_tokens is not None
    if not info.usage_reported:
        info.notes.append("the server reports no usage: input tokens unknown, output tokens counted from chunks")
        info.warnings.append("prompt calibration impossible: the server reports no usage.prompt_tokens, so prompt "
                             "lengths assume 1 token per word")
        return info
    second = await _probe(pool, prompts[1], opts, epoch, cfg.timeout_s)
    _calibrate(info, first, second)
    return info


def _refuse_doubled_v1(url: str, status: int) -> None:
    """A --url that ends in /v1 makes every route /v1/v1/...: a 404 there is the URL, not the server."""
    path = urlsplit(url).path.rstrip("/")
    if status == 404 and path.endswith("/v1"):
        fixed = url.rstrip("/")[: -len("/v1")]
        raise UsageError(f"{url}/v1/models answered 404: triage adds /v1 to the URL itself, so drop it "
                         f"(--url {fixed})")


async def _server_info(client: httpx.AsyncClient, cfg: BenchConfig) -> ServerInfo:
    """The model to request (--model, checked, else the first listed), its max_model_len and the version."""
    try:
        resp = await client.get("/v1/models")
    except httpx.HTTPError as e:
        raise _unreachable(cfg.url, e) from None
    if resp.status_code in (401, 403):
        raise TargetUnreachable(f"{cfg.url} refused the request (HTTP {resp.status_code}): pass --api-key "
                                "or set OPENAI_API_KEY")
    _refuse_doubled_v1(cfg.url, resp.status_code)
    models = _listed_models(resp)
    model = cfg.model or (models[0]["id"] if models else None)
    if model is None:
        raise UsageError(f"{cfg.url}/v1/models lists no model (HTTP {resp.status_code}): pass --model")
    ids = [m["id"] for m in models]
    if cfg.model and ids and cfg.model not in ids:
        raise UsageError(f"model {cfg.model!r} is not served at {cfg.url}; it serves: {', '.join(ids)}")
    entry = next((m for m in models if m["id"] == model), {})
    max_len = entry.get("max_model_len")
    return ServerInfo(model=model, max_model_len=max_len if isinstance(max_len, int) else None,
                      owned_by=entry.get("owned_by"), engine_version=await _server_version(client))


def _listed_models(resp: httpx.Response) -> list[dict[str, Any]]:
    if resp.status_code != 200:
        return []
    try:
        data = resp.json().get("data", [])
        return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, AttributeError):
        return []


async def _without_extras(pool: ConnectionPool, item: PromptItem, opts: RequestOptions, first: RequestRecord,
                          info: ServerInfo, cfg: BenchConfig, epoch: float) -> tuple[RequestRecord, RequestOptions]:
    """A 400/422 on the first probe: drop the optional extras one at a time (continuous_usage_stats, then
    ignore_eos/min_tokens) until the server takes the request; (its record, the options it took)."""
    retry = None
    for change, note in (({"continuous_usage": False}, "the server refused a request with stream_options."
                          "continuous_usage_stats, so it is not sent; multi-token chunks are split by the mean tokens per chunk"),
                         ({"send_ignore_eos": False}, "the server refused a request with ignore_eos/min_tokens, "
                          "so they are not sent; output lengths may be shorter than asked")):
        opts = dataclasses.replace(opts, **change)
        retry = await send(pool, item, opts, level="probe", repeat=0, warmup=True, epoch=epoch,
                           timeout_s=cfg.timeout_s)
        info.notes.append(f"{note} ({first.error})")
        if retry.ok:
            break
    if retry is None or not retry.ok:
        raise UsageError(f"the server rejects a minimal {cfg.endpoint.value} request: {retry.error}. "
                         "Check --endpoint and --model")
    info.continuous_usage, info.send_ignore_eos = opts.continuous_usage, opts.send_ignore_eos
    return retry, opts


def _calibrate(info: ServerInfo, first: RequestRecord, second: RequestRecord) -> None:
    """Tokens per prompt word from the two probes' prompt_tokens (else from the first alone, with a warning)."""
    if second.ok and second.input_tokens is not None and first.input_tokens is not None:
        slope = (second.input_tokens - first.input_tokens) / (PROBE_WORDS[1] - PROBE_WORDS[0])
        if slope > 0:
            info.calibration = TokenCalibration(tokens_per_word=slope,
                                                overhead_tokens=first.input_tokens - slope * PROBE_WORDS[0],
                                                measured=True)
            return
    # One point only: the whole first prompt's tokens over its words (the template overhead counts as prompt,
    # so prompts come out a little short, never several times too long).
    slope_one = first.input_tokens / PROBE_WORDS[0] if first.input_tokens else 1.0
    info.calibration = TokenCalibration(tokens_per_word=max(slope_one, 1e-3), measured=False)
    reason = f"{second.error_kind}: {second.error}" if not second.ok else \
        f"prompt_tokens {first.input_tokens} -> {second.input_tokens} did not grow with the words"
    info.warnings.append(f"prompt calibration failed on its second probe ({reason}); prompts are sized from "
                         f"the first probe alone ({info.calibration.tokens_per_word:.2f} tokens per word)")


async def _probe(pool: ConnectionPool, item: PromptItem, opts: RequestOptions, epoch: float,
                 timeout_s: float) -> RequestRecord:
    """A calibration probe, sent a second time if the first try failed (a dropped connection, a busy server)."""
    record = await send(pool, item, opts, level="probe", repeat=0, warmup=True, epoch=epoch, timeout_s=timeout_s)
    if record.ok:
        return record
    return await send(pool, item, opts, level="probe", repeat=0, warmup=True, epoch=epoch, timeout_s=timeout_s)


def check_sweep_fits(cfg: BenchConfig, max_model_len: int | None) -> None:
    """In an --input-len sweep every length must fit the server's context with the output: a length that had to
    be shortened would silently measure a shorter prompt than its level says. (One length is shortened to fit,
    as it always was.)"""
    if max_model_len is None or not cfg.input_lens:
        return
    longest_ok = max_model_len - cfg.output_len - 1
    too_long = [n for n in cfg.input_lens if n > longest_ok]
    if too_long:
        raise UsageError(f"--input-len {', '.join(map(str, too_long))}: the server's max_model_len is {max_model_len}, "
                         f"so with --output-len {cfg.output_len} a prompt can be at most {longest_ok} tokens: drop or "
                         "lower those lengths, or lower --output-len")


def check_turns_fit(cfg: BenchConfig, max_model_len: int | None) -> None:
    """A conversation's last turn carries every earlier prompt and reply: it must fit the server's context."""
    if cfg.turns <= 1 or max_model_len is None:
        return
    needed = cfg.turns * (cfg.input_len + cfg.output_len)
    if needed > max_model_len:
        raise UsageError(f"--turns {cfg.turns} with --input-len {cfg.input_len} and --output-len {cfg.output_len} "
                         f"grows a conversation to about {needed} tokens, past the server's max_model_len "
                         f"{max_model_len}: lower --turns, --input-len or --output-len")
