"""A real llama.cpp `llama-server` on loopback, for the slow live tests. It runs only where the binary
is on PATH (or TRIAGE_LLAMA_SERVER names it): building it takes about 15 minutes (docs/ENGINES.md).
The model is a tiny random-weight GGUF the test writes itself with the `gguf` package."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_engines import LiveServer, _free_port


def write_tiny_gguf(path: Path, n_vocab: int = 512, n_embd: int = 64, n_layer: int = 2, n_head: int = 4,
                    n_head_kv: int = 2, n_ff: int = 128, n_ctx: int = 2048, seed: int = 0,
                    silent_words: bool = False) -> Path:
    """A 2-layer Llama in GGUF (f32, SentencePiece-style vocabulary of byte and word pieces). With
    `silent_words`, every word piece is a control token, which llama-server does not render: a request then
    generates its tokens and streams no text, as a real model does when it spends max_tokens on special tokens."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("triage-tiny")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_file_type(0)
    words = n_vocab - 259
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)]
                     + [f"\u2581w{i}".encode() for i in range(words)])
    w.add_token_scores([0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(words)])
    w.add_token_types([2, 3, 3] + [6] * 256 + [3 if silent_words else 1] * words)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_chat_template("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                        "{% if add_generation_prompt %}assistant: {% endif %}")

    def rand(name: str, *shape: int) -> None:
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    kv = n_head_kv * (n_embd // n_head)
    rand("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, np.float32))
        rand(f"blk.{i}.attn_q.weight", n_embd, n_embd)
        rand(f"blk.{i}.attn_k.weight", kv, n_embd)
        rand(f"blk.{i}.attn_v.weight", kv, n_embd)
        rand(f"blk.{i}.attn_output.weight", n_embd, n_embd)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, np.float32))
        rand(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        rand(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        rand(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    out = (rng.standard_normal((n_vocab, n_embd)) * 0.02).astype(np.float32)
    if silent_words:
        out[:259] = 0.0   # special and byte pieces never win the argmax: only (unrendered) word pieces come out
    w.add_tensor("output.weight", out)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def llama_server_parallel1(tmp_path_factory) -> Iterator[LiveServer]:
    yield from _llama_server(tmp_path_factory, slots=1)


@pytest.fixture(scope="session")
def llama_server_parallel4(tmp_path_factory) -> Iterator[LiveServer]:
    yield from _llama_server(tmp_path_factory, slots=4)


@pytest.fixture(scope="session")
def llama_server_silent(tmp_path_factory) -> Iterator[LiveServer]:
    """Four slots serving a model whose every generated piece is an unrendered control token."""
    yield from _llama_server(tmp_path_factory, slots=4, silent_words=True)


def _llama_server(tmp_path_factory, slots: int, silent_words: bool = False) -> Iterator[LiveServer]:
    binary = os.environ.get("TRIAGE_LLAMA_SERVER") or shutil.which("llama-server")
    if not binary:
        pytest.skip("llama-server is not on PATH (it takes ~15 min to build; see docs/ENGINES.md)")
    pytest.importorskip("gguf", reason="writing the test's GGUF needs the `gguf` package")
    work = tmp_path_factory.mktemp("llama-server")
    model = write_tiny_gguf(work / "tiny.gguf", silent_words=silent_words)
    port = _free_port()
    argv = (binary, "-m", str(model), "-a", "tiny-llama", "--host", "127.0.0.1", "--port", str(port),
            "--metrics", "--slots", "--parallel", str(slots), "-c", str(2048 * slots), "-t", "1")
    log = work / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"llama-server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/health", timeout=1.0, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            pytest.fail(f"llama-server never became healthy:\n{log.read_text()[-3000:]}")
        yield LiveServer(url=url, model="tiny-llama", argv=argv, pid=proc.pid, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
