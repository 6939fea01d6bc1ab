from triage.core.redact import REDACTED, redact_argv, redact_env, redact_text


def test_argv_flags_with_secrets_are_hidden():
    argv = ["vllm", "serve", "m", "--api-key", "sk-" + "abcdefghijklmnopqrstuv", "--hf-token=hf_" + "abcdefghijklmnop",
            "--max-num-seqs", "256"]
    out = redact_argv(argv)
    assert out == ["vllm", "serve", "m", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--max-num-seqs", "256"]


def test_env_secrets_are_hidden_and_others_kept():
    env = redact_env({"HF_TOKEN": "hf_zzzzzzzzzzzzzzzz", "OPENAI_API_KEY": "x", "CUDA_VISIBLE_DEVICES": "0"})
    assert env == {"HF_TOKEN": REDACTED, "OPENAI_API_KEY": REDACTED, "CUDA_VISIBLE_DEVICES": "0"}


def test_free_text_tokens_are_hidden():
    text = redact_text("Authorization: Bearer abcdefghijklmnop and sk-1234567890abcdef api_key=hunter22")
    assert "abcdefghijklmnop" not in text and "sk-1234567890abcdef" not in text and "hunter22" not in text


def test_header_flags_with_secret_names_are_hidden_and_others_kept():
    argv = ["triage", "bench", "--header", "Authorization: Bearer abc", "--header=Cookie: session=abcdef",
            "--header", "X-Auth-Token:zzz", "--header", "X-Team: infra", "--header=X-Region: eu"]
    assert redact_argv(argv) == ["triage", "bench", "--header", f"Authorization: {REDACTED}",
                                 f"--header=Cookie: {REDACTED}", "--header", f"X-Auth-Token: {REDACTED}",
                                 "--header", "X-Team: infra", "--header=X-Region: eu"]


def test_token_count_flags_are_not_secrets():
    """Found by tests/test_probe_rule_contract.py: `--max-num-batched-tokens 8192` was redacted, so
    server_config never saw the token budget the scheduling rules read."""
    from triage.core.redact import redact_argv

    argv = ["vllm", "serve", "m", "--max-num-batched-tokens", "8192", "--max-total-tokens", "4096",
            "--hf-token", "hf_abcdefghijklmnop", "--tokenizer-token=x"]
    assert redact_argv(argv) == ["vllm", "serve", "m", "--max-num-batched-tokens", "8192", "--max-total-tokens",
                                 "4096", "--hf-token", "***", "--tokenizer-token=***"]
