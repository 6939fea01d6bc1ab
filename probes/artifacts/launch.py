"""A launch command from a ticket -> the server's argv, its engine, and any NUMA binding wrapped around it.

Forms: a shell line (`vllm serve M --max-num-seqs 64`, `python -m sglang.launch_server ...`,
`text-generation-launcher ...`, `llama-server ...`, continued with `\\`), a `docker run ... IMAGE ARGS` whose image
an engine module names (its entrypoint is the engine's launcher), and a Kubernetes container's `command:`/`args:`
lists. `numactl --cpunodebind=N --membind=N` in front is the process's binding (what CPU001 judges).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

import yaml

from triage.core.redact import redact_argv, redact_env
from triage.engines import Engine, engines, launched_by

_PROMPT = re.compile(r"^\s*(\$|#|>)\s+")


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]                 # the engine's own argv (redacted), wrappers removed
    engine: Engine
    cpu_nodes: tuple[int, ...] = ()       # numactl --cpunodebind / -N
    mem_nodes: tuple[int, ...] = ()       # numactl --membind / -m
    env: dict[str, str] = field(default_factory=dict)   # docker -e NAME=value


def _lines(text: str) -> list[str]:
    """Shell lines with `\\` continuations joined and prompts removed."""
    joined = re.sub(r"\\\s*\n", " ", text)
    return [_PROMPT.sub("", ln).strip() for ln in joined.splitlines() if ln.strip()]


def _split(line: str) -> list[str] | None:
    try:
        return shlex.split(line, comments=False)
    except ValueError:
        return None


def _nodes(value: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", value))


def _unwrap_numactl(argv: list[str]) -> tuple[list[str], tuple[int, ...], tuple[int, ...]]:
    if not argv or argv[0].rsplit("/", 1)[-1] != "numactl":
        return argv, (), ()
    cpu: tuple[int, ...] = ()
    mem: tuple[int, ...] = ()
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        name, _, value = argv[i].partition("=")
        if not value and name in ("-N", "-m", "--cpunodebind", "--membind", "-C", "--physcpubind") and i + 1 < len(argv):
            i += 1
            value = argv[i]
        if name in ("-N", "--cpunodebind"):
            cpu = _nodes(value)
        elif name in ("-m", "--membind"):
            mem = _nodes(value)
        i += 1
    return argv[i:], cpu, mem


def _image_name(ref: str) -> str:
    """`registry:5000/vllm/vllm-openai:v0.8.5@sha256:...` -> `registry:5000/vllm/vllm-openai` (no tag, no digest)."""
    name = ref.split("@")[0]
    return name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name


def _from_docker(argv: list[str]) -> tuple[list[str], dict[str, str]] | None:
    """`docker run [opts] IMAGE ARGS` -> (the launcher's argv, the -e variables), for an image an engine names."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] not in ("docker", "podman", "nerdctl") or argv[1] != "run":
        return None
    env: dict[str, str] = {}
    for i, arg in enumerate(argv[2:], start=2):
        if arg in ("-e", "--env") and i + 1 < len(argv) and "=" in argv[i + 1]:
            k, _, v = argv[i + 1].partition("=")
            env[k] = v
        image = _image_name(arg)
        for e in engines():
            if e.launcher and any(image.endswith(img) for img in e.identity.images):
                rest = argv[i + 1:]
                launched = launched_by(rest)
                return (rest if launched is not None else [*shlex.split(e.launcher), *rest]), env
    return None


def _from_yaml(text: str) -> list[str] | None:
    """A Kubernetes container (or a list of them): its `command` then its `args`."""
    if "args:" not in text and "command:" not in text:
        return None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    for parts in _containers(doc):
        argv = parts if len(parts) > 1 else _split(parts[0]) or parts
        if launched_by(argv) is not None:
            return argv
    return None


def _containers(node: object) -> list[list[str]]:
    """Every `command` + `args` of a mapping anywhere in a YAML document."""
    if isinstance(node, list):
        return [parts for v in node for parts in _containers(v)]
    if not isinstance(node, dict):
        return []
    parts = [str(x) for key in ("command", "args") if isinstance(node.get(key), list) for x in node[key]]
    return ([parts] if parts else []) + [p for v in node.values() for p in _containers(v)]


def _command(argv: list[str], env: dict[str, str] | None = None) -> Command | None:
    inner, cpu, mem = _unwrap_numactl(argv)
    docker = _from_docker(inner)
    if docker is not None:
        inner, env = docker
    engine = launched_by(inner)
    if engine is None:
        return None
    return Command(tuple(redact_argv(inner)), engine, cpu, mem, redact_env(env or {}))


def find_command(text: str) -> Command | None:
    """The first engine launch in `text`, or None. A block of more than 40 lines is a log, not a command."""
    if len(text.splitlines()) > 40:
        return None
    argv = _from_yaml(text)
    if argv is not None:
        return _command(argv)
    for line in _lines(text):
        argv = _split(line)
        if argv and (cmd := _command(argv)) is not None:
            return cmd
    return None
