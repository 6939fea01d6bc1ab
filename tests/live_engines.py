"""Third-party servers started for real on loopback: `transformers serve` (a pip install) on a tiny
checkpoint the test writes itself (nothing is downloaded). llama.cpp's `llama-server` takes about 15
minutes to build, so its live test (marked slow) runs only where `llama-server` is on PATH; see
docs/ENGINES.md for how to build it."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

STARTUP_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class LiveServer:
    url: str
    model: str
    argv: tuple[str, ...]
    pid: int
    log: Path | None = None          # what the server wrote to stdout and stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tiny_llama(out: Path) -> Path:
    """A 2-layer Llama with a word-level tokenizer and a chat template, saved as a local HF checkpoint."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(253)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(out)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(out, safe_serialization=True)
    return out


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    pytest.fail(f"no /health within {STARTUP_TIMEOUT_S:g} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory) -> Iterator[LiveServer]:
    cli = shutil.which("transformers", path=os.path.dirname(sys.executable)) or shutil.which("transformers")
    for module in ("transformers", "accelerate", "fastapi", "uvicorn"):
        try:
            __import__(module)
        except ImportError:
            pytest.skip(f"`transformers serve` needs {module} (pip install 'transformers[serving]' accelerate)")
    if cli is None:
        pytest.skip("the `transformers` command is not installed")
    work = tmp_path_factory.mktemp("transformers-serve")
    model = write_tiny_llama(work / "tiny")
    port = _free_port()
    argv = (cli, "serve", str(model), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu")
    log = work / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield LiveServer(url=url, model=str(model), argv=argv, pid=proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
