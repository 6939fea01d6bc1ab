"""Workloads: length distributions, seeds, the shared prefix, context clipping, and ShareGPT files."""
from __future__ import annotations

import json

import numpy as np
import pytest

from triage.bench.prompts import TokenCalibration, build, sample_lengths, synthetic
from triage.bench.run_config import BenchConfig, LenDist, parse_headers, parse_slo
from triage.core.convert import to_dict
from triage.core.errors import UsageError


@pytest.mark.parametrize("dist", list(LenDist))
def test_length_distributions_have_the_asked_mean(dist):
    values = sample_lengths(dist, 200, 4000, np.random.default_rng(1))
    assert values.min() >= 1
    assert values.mean() == pytest.approx(200, rel=0.05)
    if dist is LenDist.FIXED:
        assert set(values.tolist()) == {200}
    else:
        assert values.std() > 10


def test_synthetic_prompts_are_seeded_sized_and_share_their_prefix():
    cfg = BenchConfig(url="http://x", input_len=40, output_len=8, shared_prefix_len=10, seed=3)
    cal = TokenCalibration(tokens_per_word=2.0, overhead_tokens=0.0, measured=True)
    items = synthetic(cfg, 5, cal)
    assert [i.prompt for i in items] == [i.prompt for i in synthetic(cfg, 5, cal)]  # deterministic
    prefix = items[0].prompt.split()[:5]  # 10 tokens at 2 tokens/word
    assert all(i.prompt.split()[:5] == prefix for i in items)
    assert all(len(i.prompt.split()) == 20 for i in items)  # 40 tokens / 2 per word
    assert len({i.prompt for i in items}) == 5
    assert all(i.output_tokens == 8 for i in items)


def test_prompts_are_clipped_to_fit_max_model_len():
    cfg = BenchConfig(url="http://x", input_len=100, output_len=20)
    items = synthetic(cfg, 3, TokenCalibration(), max_model_len=64)
    assert all(i.input_tokens_target + i.output_tokens < 64 for i in items)
    with pytest.raises(UsageError, match="max_model_len"):
        synthetic(BenchConfig(url="http://x", input_len=10, output_len=64), 1, TokenCalibration(), max_model_len=64)


def test_shared_prefix_must_be_shorter_than_the_prompt():
    with pytest.raises(UsageError, match="shared-prefix-len"):
        synthetic(BenchConfig(url="http://x", input_len=10, shared_prefix_len=10), 1, TokenCalibration())


def test_sharegpt_json_and_jsonl(tmp_path):
    records = [
        {"conversations": [{"from": "human", "value": "What is KV cache?"}, {"from": "gpt", "value": "x" * 400}]},
        {"conversations": [{"from": "gpt", "value": "no human turn"}]},
        {"prompt": "Say hi"},
    ]
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps(records))
    as_jsonl = tmp_path / "d.jsonl"
    as_jsonl.write_text("\n".join(json.dumps(r) for r in records))
    for path in (as_json, as_jsonl):
        cfg = BenchConfig(url="http://x", dataset=path, output_len=33)
        items = build(cfg, 4, TokenCalibration())
        by_prompt = {i.prompt: i.output_tokens for i in items}
        assert by_prompt == {"What is KV cache?": 100, "Say hi": 33}  # 400 chars / 4; no reply: --output-len


def test_bad_dataset_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[{not json")
    with pytest.raises(UsageError, match="not ShareGPT"):
        build(BenchConfig(url="http://x", dataset=bad), 1, TokenCalibration())
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"foo": 1}\n')
    with pytest.raises(UsageError, match="no usable records"):
        build(BenchConfig(url="http://x", dataset=empty), 1, TokenCalibration())


def test_slo_and_header_parsing():
    assert parse_slo("ttft_ms=500,tpot_ms=50") == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    assert parse_slo(None) is None
    for bad in ("ttft=5", "ttft_ms=fast", "ttft_ms=-1"):
        with pytest.raises(UsageError):
            parse_slo(bad)
    assert parse_headers(["X-Team: infra"]) == {"X-Team": "infra"}
    with pytest.raises(UsageError):
        parse_headers(["no-colon"])


def test_config_never_carries_secrets():
    cfg = BenchConfig(url="http://x", api_key="sk-abcdefghijkl", headers={"Authorization": "Bearer zzz",
                                                                          "X-Team": "infra"})
    text = json.dumps(to_dict(cfg.report_config()))
    assert "sk-abcdefghijkl" not in text and "zzz" not in text
    assert cfg.report_config().headers == {"Authorization": "***", "X-Team": "infra"}
