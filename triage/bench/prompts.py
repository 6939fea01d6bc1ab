"""Prompts for a bench run: synthetic prompts with a length distribution and an optional shared prefix, or a
ShareGPT-format JSON/JSONL file.

Lengths are asked for in tokens, but the client does not know the server's tokenizer. The runner calibrates
`tokens_per_word` from the server's own `usage.prompt_tokens` (two probe prompts of known word counts) and the
synthetic prompts are sized in words from it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triage.bench.run_config import BenchConfig, LenDist
from triage.core.errors import UsageError

# Short, common English words: one token each in the usual BPE vocabularies (with their leading space).
WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education "
    "foot boy age policy music market sense nation plan college interest death experience effect use class "
    "control care field development role effort rate heart drug show leader light voice wife police mind "
    "price report decision son view relationship town road arm difference value building action model season "
    "society tax director position player record paper space ground form event official matter center couple "
    "site project activity star table need court oil situation cost industry figure street image phone data"
).split()

# The ShareGPT convention: about 4 characters of English per token, used only to size a dataset reply.
CHARS_PER_TOKEN = 4.0
MAX_DATASET_OUTPUT_TOKENS = 4096


@dataclass(frozen=True, slots=True)
class PromptItem:
    """One request's prompt. `input_tokens_target` is what was asked for; the server's usage says what it was."""

    index: int
    prompt: str
    output_tokens: int
    input_tokens_target: int | None = None
    # Multi-turn: the whole chat history to send (the prompt is then the last user message).
    messages: tuple[dict[str, str], ...] | None = None
    conversation: int | None = None
    turn: int | None = None
    # Trace replay: when to send (s from the level start) and the trace line it came from.
    arrival_s: float | None = None
    trace_line: int | None = None


@dataclass(frozen=True, slots=True)
class TokenCalibration:
    """prompt_tokens ~= overhead_tokens + tokens_per_word * words, fitted from the server's usage."""

    tokens_per_word: float = 1.0
    overhead_tokens: float = 0.0
    measured: bool = False

    def words_for(self, tokens: int) -> int:
        return max(1, round((tokens - self.overhead_tokens) / max(self.tokens_per_word, 1e-6)))


def sample_lengths(dist: LenDist, mean_tokens: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n integer lengths >= 1 with the given mean. uniform spans [0.5, 1.5] x mean; normal has a 25% relative
    standard deviation; lognormal has sigma 0.5 (a long right tail, as real chat traffic has)."""
    if dist is LenDist.FIXED:
        values = np.full(n, float(mean_tokens))
    elif dist is LenDist.UNIFORM:
        values = rng.uniform(0.5 * mean_tokens, 1.5 * mean_tokens, n)
    elif dist is LenDist.NORMAL:
        values = rng.normal(mean_tokens, 0.25 * mean_tokens, n)
    else:
        sigma = 0.5
        values = rng.lognormal(math.log(mean_tokens) - sigma * sigma / 2, sigma, n)
    return np.maximum(1, np.rint(values)).astype(int)


def _words(rng: np.random.Generator, count: int) -> str:
    picks = rng.integers(0, len(WORDS), count)
    return " ".join(WORDS[i] for i in picks)


def synthetic(cfg: BenchConfig, n: int, calibration: TokenCalibration,
              max_model_len: int | None = None) -> list[PromptItem]:
    """n synthetic prompts. The first `shared_prefix_len` tokens are the same in every prompt. With
    `max_model_len`, a sampled prompt is shortened so that prompt + output fits the server's context."""
    if cfg.shared_prefix_len >= cfg.input_len:
        raise UsageError(f"--shared-prefix-len {cfg.shared_prefix_len} must be below --input-len {cfg.input_len}: "
                         "the prefix is part of the prompt")
    rng = np.random.default_rng(cfg.seed)
    inputs = sample_lengths(cfg.len_dist, cfg.input_len, n, rng)
    outputs = sample_lengths(cfg.len_dist, cfg.output_len, n, rng)
    if max_model_len is not None:
        if cfg.shared_prefix_len + int(outputs.max()) >= max_model_len:
            raise UsageError(f"--output-len {cfg.output_len} (longest sampled: {int(outputs.max())}) leaves no "
                             f"room for a prompt in the server's max_model_len {max_model_len}: lower it")
        inputs = np.maximum(np.minimum(inputs, max_model_len - outputs - 1), cfg.shared_prefix_len + 1)
    # One shared prefix (--shared-prefix-len), or --prefix-groups G of them, request i taking prefix i mod G.
    prefix_tokens = cfg.prefix_len if cfg.prefix_groups else cfg.shared_prefix_len
    prefix_words = calibration.words_for(prefix_tokens) if prefix_tokens else 0
    prefixes = [_words(np.random.default_rng(cfg.seed + 1 + g), prefix_words) if prefix_words else ""
                for g in range(max(1, cfg.prefix_groups))]
    items = []
    for i in range(n):
        words = max(1, calibration.words_for(int(inputs[i])) - prefix_words)
        body = _words(rng, words)
        prefix = prefixes[i % len(prefixes)]
        prompt = f"{prefix} {body}" if prefix else body
        items.append(PromptItem(index=i, prompt=prompt, output_tokens=int(outputs[i]),
                                input_tokens_target=int(inputs[i])))
    return items


def _sharegpt_pair(record: object) -> tuple[str, str | None] | None:
    """(first human turn, the reply after it) of one ShareGPT record, or a {"prompt": ...} record."""
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("prompt"), str):
        reply = record.get("completion") or record.get("response")
        return record["prompt"], reply if isinstance(reply, str) else None
    turns = record.get("conversations") or record.get("conversation")
    if not isinstance(turns, list):
        return None
    for i, turn in enumerate(turns):
        if isinstance(turn, dict) and turn.get("from", turn.get("role")) in ("human", "user"):
            text = turn.get("value", turn.get("content"))
            if not isinstance(text, str) or not text.strip():
                return None
            nxt = turns[i + 1] if i + 1 < len(turns) else None
            reply = nxt.get("value", nxt.get("content")) if isinstance(nxt, dict) else None
            return text, reply if isinstance(reply, str) else None
    return None


def load_dataset_records(path: Path) -> list[object]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--dataset {path}: cannot read it ({e.strerror or e})") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            data = json.loads(text)
            if not isinstance(data, list):
                raise ValueError("top level is not a list")
            return data
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, json.JSONDecodeError) as e:
        raise UsageError(f"--dataset {path}: not ShareGPT JSON (a list) or JSONL (one record a line): {e}") from None


def from_dataset(path: Path, cfg: BenchConfig, n: int) -> list[PromptItem]:
    """n prompts from a ShareGPT file, shuffled with --seed and cycled if the file has fewer than n usable
    records. The output length is the recorded reply's length (about 4 characters a token) or --output-len."""
    pairs = [p for p in (_sharegpt_pair(r) for r in load_dataset_records(path)) if p is not None]
    if not pairs:
        raise UsageError(f"--dataset {path}: no usable records. Expected ShareGPT records "
                         '({"conversations": [{"from": "human", "value": ...}, ...]}) or {"prompt": ...} lines')
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(pairs))
    items = []
    for i in range(n):
        prompt, reply = pairs[int(order[i % len(pairs)])]
        if reply:
            out = int(min(MAX_DATASET_OUTPUT_TOKENS, max(1, round(len(reply) / CHARS_PER_TOKEN))))
        else:
            out = cfg.output_len
        items.append(PromptItem(index=i, prompt=prompt, output_tokens=out))
    return items


def from_trace(cfg: BenchConfig, calibration: TokenCalibration, max_model_len: int | None,
               time_scale: float = 1.0) -> list[PromptItem]:
    """One prompt per trace row. Each hash id is one block of `block_tokens` tokens whose words are seeded by
    the id, so rows that share leading hash ids share their leading prompt blocks (the prefix cache sees what
    production saw); the prompt is then cut to the row's input_length. An output that would not fit the
    server's context is shortened."""
    trace = cfg.trace
    block_words = calibration.words_for(trace.block_tokens)
    blocks: dict[int, str] = {}
    schedule = trace.schedule_s(time_scale)
    items = []
    for i, row in enumerate(trace.rows):
        words_needed = calibration.words_for(row.input_length)
        parts = []
        for h in row.hash_ids:
            if h not in blocks:
                blocks[h] = _words(np.random.default_rng([cfg.seed, 7, h]), block_words)
            parts.append(blocks[h])
        text = " ".join(parts).split(" ") if parts else []
        if len(text) < words_needed:  # past the hashed blocks: this row's own words
            text += _words(np.random.default_rng([cfg.seed, 11, i]), words_needed - len(text)).split(" ")
        output = row.output_length
        if max_model_len is not None:
            output = max(1, min(output, max_model_len - row.input_length - 1))
        items.append(PromptItem(index=i, prompt=" ".join(text[:words_needed]), output_tokens=output,
                                input_tokens_target=row.input_length, arrival_s=schedule[i], trace_line=row.line))
    return items


def build(cfg: BenchConfig, n: int, calibration: TokenCalibration,
          max_model_len: int | None = None) -> list[PromptItem]:
    if cfg.trace is not None:
        return from_trace(cfg, calibration, max_model_len)
    if cfg.dataset is not None:
        return from_dataset(cfg.dataset, cfg, n)
    return synthetic(cfg, n, calibration, max_model_len)
