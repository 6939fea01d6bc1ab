"""The OpenAI wire format of the reference server: request models, response bodies, SSE framing.

Pure data in, data out: nothing here touches the engine or the network, so every rule about what a
request may contain is testable without a server.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

MAX_STOP_SEQUENCES = 16
COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's (and vLLM's) default for /v1/completions


class ApiError(Exception):
    """A request the server refuses, with the HTTP status and the OpenAI error type to send."""

    def __init__(self, status_code: int, message: str, err_type: str = "invalid_request_error",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.status_code, self.message, self.err_type, self.param)


def error_body(status_code: int, message: str, err_type: str, param: str | None = None) -> dict[str, Any]:
    """The body OpenAI (and the openai client) use for errors: {"error": {message, type, param, code}}."""
    return {"error": {"message": message, "type": err_type, "param": param, "code": status_code}}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False
    continuous_usage_stats: bool = False


class _Sampling(BaseModel):
    """Fields common to both endpoints. Unknown fields are ignored, as vLLM and OpenAI do."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    ignore_eos: bool = False
    min_tokens: int = Field(default=0, ge=0)
    n: int = Field(default=1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: Any = None
    user: str | None = None

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        stops = [value] if isinstance(value, str) else (value or [])
        if len(stops) > MAX_STOP_SEQUENCES:
            raise ValueError(f"at most {MAX_STOP_SEQUENCES} stop sequences")
        if any(s == "" for s in stops):
            raise ValueError("stop sequences must not be empty strings")
        return value

    def stop_sequences(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def check_supported(self) -> None:
        """Fields the reference engine does not implement are refused, never silently ignored."""
        if self.n != 1:
            raise ApiError(400, "n > 1 is not supported by the reference engine; send n requests", param="n")
        if self.presence_penalty or self.frequency_penalty:
            raise ApiError(400, "presence_penalty and frequency_penalty are not supported by the "
                                "reference engine; leave them at 0", param="presence_penalty")
        if self.logprobs not in (None, False, 0):
            raise ApiError(400, "logprobs are not supported by the reference engine", param="logprobs")
        if self.stream_options is not None and not self.stream:
            raise ApiError(400, "stream_options can only be given when stream is true",
                           param="stream_options")
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise ApiError(400, f"min_tokens ({self.min_tokens}) must not exceed max_tokens "
                                f"({self.max_tokens})", param="min_tokens")

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)

    @property
    def continuous_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.continuous_usage_stats)


class CompletionRequest(_Sampling):
    prompt: str | list[int] | list[str] | list[list[int]]
    echo: bool = False
    suffix: str | None = None

    def single_prompt(self) -> str | list[int]:
        prompt = self.prompt
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
            if len(prompt) != 1:
                raise ApiError(400, "batched prompts are not supported by the reference engine; "
                                    "send one request per prompt", param="prompt")
            prompt = prompt[0]
        if (isinstance(prompt, str) and prompt == "") or (isinstance(prompt, list) and not prompt):
            raise ApiError(400, "prompt must not be empty", param="prompt")
        if self.echo:
            raise ApiError(400, "echo is not supported by the reference engine", param="echo")
        if self.suffix:
            raise ApiError(400, "suffix is not supported by the reference engine", param="suffix")
        return prompt


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)

    def effective_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


def render_chat(messages: list[ChatMessage]) -> str:
    """The reference models carry no chat template; this plain one marks each turn with its role and
    leaves the prompt open for the assistant's reply."""
    turns = [f"<|{m.role}|>\n{m.text()}\n" for m in messages]
    return "".join(turns) + "<|assistant|>\n"


def parse_request(raw: bytes, model_cls: type[_Sampling]) -> Any:
    """Raw body → validated request, or ApiError(400) that names the bad field."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ApiError(400, f"request body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    try:
        return model_cls.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors()[:5]:
            loc = ".".join(str(p) for p in err["loc"])
            problems.append(f"{loc}: {err['msg']}")
        first = e.errors()[0]["loc"][0] if e.errors() else None
        raise ApiError(400, "invalid request: " + "; ".join(problems),
                       param=str(first) if first is not None else None) from None


# Responses ------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }


def new_request_id(kind: Literal["cmpl", "chatcmpl"]) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


def now_unix_s() -> int:
    return int(time.time())


def completion_body(rid: str, model: str, created: int, text: str, finish_reason: str | None,
                    usage: Usage) -> dict[str, Any]:
    return {
        "id": rid, "object": "text_completion", "created": created, "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                     "stop_reason": None}],
        "usage": usage.as_dict(),
    }


def completion_chunk(rid: str, model: str, created: int, text: str, finish_reason: str | None,
                     usage: Usage | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": rid, "object": "text_completion", "created": created, "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                     "stop_reason": None}],
    }
    if usage is not None:
        chunk["usage"] = usage.as_dict()
    return chunk


def chat_body(rid: str, model: str, created: int, text: str, finish_reason: str | None,
              usage: Usage) -> dict[str, Any]:
    return {
        "id": rid, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}],
        "usage": usage.as_dict(),
    }


def chat_chunk(rid: str, model: str, created: int, delta: dict[str, Any], finish_reason: str | None,
               usage: Usage | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None:
        chunk["usage"] = usage.as_dict()
    return chunk


def usage_chunk(rid: str, model: str, created: int, obj: str, usage: Usage) -> dict[str, Any]:
    """The last chunk when stream_options.include_usage is set: no choices, only usage."""
    return {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
            "usage": usage.as_dict()}


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: a `data:` line and a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


SSE_DONE = sse("[DONE]")
