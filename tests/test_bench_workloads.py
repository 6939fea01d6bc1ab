"""The workloads against the real reference server (small sizes): multi-turn, trace replay, prefix groups,
step and linear ramps; and bad workload input, which exits 2 before any load."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.bench_loopback import LoopbackServer
from triage.bench.records import read_records
from triage.cli import app

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_TRACE = REPO / "docs" / "examples" / "mooncake_small.jsonl"
SMALL = ["--input-len", "16", "--output-len", "6", "--warmup", "1"]


def bench(url: str, tmp_path: Path, *args: str) -> tuple[dict, list]:
    result = CliRunner().invoke(app, ["--no-color", "bench", "--url", url, *SMALL, *args,
                                      "--json", str(tmp_path / "r.json"), "--jsonl", str(tmp_path / "r.jsonl")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "r.json").read_text()), read_records(tmp_path / "r.jsonl")


def test_multi_turn_history_grows_and_ttft_is_per_turn(reference_server, tmp_path, report_validator):
    data, records = bench(reference_server.url, tmp_path, "--turns", "3", "--think-time-ms", "20",
                          "--concurrency", "2", "--num-requests", "12")
    report_validator(data)
    (lv,) = data["bench"]["levels"]
    assert lv["requests"]["completed"] == 12
    turns = lv["workload"]["turns"]
    assert sorted(turns) == ["1", "2", "3"] and all(t["requests"] == 4 for t in turns.values())
    # each turn carries the whole history: the prompt grows by the previous prompt and reply
    assert turns["1"]["input_tokens_mean"] < turns["2"]["input_tokens_mean"] < turns["3"]["input_tokens_mean"]
    assert data["bench"]["config"]["endpoint"] == "chat"
    assert data["bench"]["config"]["workload"]["turns"] == 3
    measured = [r for r in records if r.turn is not None and not r.warmup]
    assert {(r.conversation, r.turn) for r in measured} == {(c, t) for c in range(4) for t in (1, 2, 3)}


def test_multi_turn_sends_the_servers_real_replies_as_history(tmp_path):
    with LoopbackServer() as srv:
        bench(srv.url, tmp_path, "--turns", "2", "--concurrency", "1", "--num-requests", "2", "--warmup", "0")
        last = srv.posts()[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[1]["content"] == " tok" * 6  # what the server streamed on turn 1


def test_trace_replay_follows_the_trace_and_says_when_it_was_cut(reference_server, tmp_path, report_validator):
    data, records = bench(reference_server.url, tmp_path, "--trace", str(EXAMPLE_TRACE), "--num-requests", "10",
                          "--time-scale", "0.5")
    report_validator(data)
    config = data["bench"]["config"]
    trace = config["workload"]["trace"]
    assert trace["num_requests"] == 10 and trace["num_requests_in_file"] == 24 and trace["cut"] is True
    assert len(trace["sha256"]) == 64 and trace["time_scales"] == [0.5]
    assert any("cut the trace" in n for n in config["notes"])
    (lv,) = data["bench"]["levels"]
    assert lv["requests"]["completed"] == 10
    rows = [json.loads(line) for line in EXAMPLE_TRACE.read_text().splitlines()]
    measured = sorted((r for r in records if r.trace_line is not None), key=lambda r: r.trace_line)
    assert [r.trace_line for r in measured] == list(range(1, 11))
    # sent at the trace's (scaled) times
    sends = [r.t0_s - measured[0].t0_s for r in measured]
    expected = [(rows[i]["timestamp"] - rows[0]["timestamp"]) / 1000 * 0.5 for i in range(10)]
    assert all(abs(s - e) < 0.1 for s, e in zip(sends, expected, strict=True))
    for r in measured:  # prompt lengths follow input_length (calibrated on the server's tokenizer)
        assert abs(r.input_tokens - rows[r.trace_line - 1]["input_length"]) <= 0.35 * rows[r.trace_line - 1][
            "input_length"] + 8


def test_trace_rows_sharing_hash_ids_share_prompt_blocks(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 30, "output_length": 4, "hash_ids": [7, 1]}\n'
                     '{"timestamp": 10, "input_length": 30, "output_length": 4, "hash_ids": [7, 2]}\n'
                     '{"timestamp": 20, "input_length": 30, "output_length": 4, "hash_ids": [8, 3]}\n')
    with LoopbackServer() as srv:
        result = CliRunner().invoke(app, ["--no-color", "bench", "--url", srv.url, "--trace", str(trace),
                                          "--warmup", "0", "--json", str(tmp_path / "r.json")])
        prompts = [e["prompt"].split() for e in srv.posts()]
    assert result.exit_code == 0, result.output
    assert len(prompts) == 3
    # rows 1 and 2 start with hash id 7 (one 512-token block covers their 30 tokens): the same prompt;
    # row 3 starts with block 8: shares nothing with them
    assert prompts[0] == prompts[1]
    assert prompts[2][:5] != prompts[0][:5]


def test_prefix_groups_give_g_shared_prefixes(tmp_path):
    with LoopbackServer() as srv:
        data, _ = bench(srv.url, tmp_path, "--prefix-groups", "2", "--prefix-len", "8", "--input-len", "20",
                        "--concurrency", "1", "--num-requests", "6", "--warmup", "0")
        prompts = sorted((e["prompt"].split() for e in srv.posts()), key=lambda p: p[:8])
    assert data["bench"]["config"]["workload"]["prefix_groups"] == 2
    assert data["bench"]["config"]["workload"]["prefix_len"] == 8
    # two groups of three: the same leading words within a group, different across, different bodies
    heads = [tuple(p[:5]) for p in prompts]  # 8 tokens = 5 words at this server's 3-token overhead
    assert len(set(heads)) == 2 and heads.count(heads[0]) == 3
    assert len({tuple(p[5:]) for p in prompts}) == 6


def test_prefix_groups_against_the_reference_server(reference_server, tmp_path):
    data, _ = bench(reference_server.url, tmp_path, "--prefix-groups", "3", "--prefix-len", "8",
                    "--concurrency", "2", "--num-requests", "6")
    assert data["bench"]["levels"][0]["requests"]["completed"] == 6
    workload = data["bench"]["config"]["workload"]
    assert (workload["prefix_groups"], workload["prefix_len"]) == (3, 8)


def test_step_ramp_makes_each_step_a_level(reference_server, tmp_path, report_validator):
    data, _ = bench(reference_server.url, tmp_path, "--ramp", "step:1,2:1s")
    report_validator(data)
    assert [lv["concurrency"] for lv in data["bench"]["levels"]] == [1, 2]
    assert data["bench"]["config"]["workload"]["ramp"] == "step:1,2:1s"
    assert data["bench"]["config"]["duration_s"] == 1.0
    assert all(lv["requests"]["completed"] > 0 and lv["requests"]["failed"] == 0 for lv in data["bench"]["levels"])


def test_linear_ramp_is_reported_in_windows(reference_server, tmp_path, report_validator):
    data, records = bench(reference_server.url, tmp_path, "--ramp", "linear:1:4:3s", "--window", "1s")
    report_validator(data)
    levels = data["bench"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2, 3]
    assert [(lv["workload"]["window_start_s"], lv["workload"]["window_end_s"]) for lv in levels] == \
        [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]
    assert all(lv["requests"]["completed"] > 0 for lv in levels)
    assert {r.level for r in records if not r.warmup and r.level != "probe"} == {"c=1", "c=2", "c=3"}


BAD_TRACE_LINES = [
    ('{"timestamp": 0, "input_length": 10, "output_length": 4, "hash_ids": [1]}\n{"timestamp": 5, "input_len',
     ":2: not JSON"),
    ('{"timestamp": 0, "input_length": 10, "output_length": 4}\n{"timestamp": -1, "input_length": 10, '
     '"output_length": 4}\n', ":2: 'timestamp' must be"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 4}\n', ":1: 'input_length' must be"),
    ('{"timestamp": 0, "input_length": 3, "output_length": 4, "hash_ids": ["a"]}\n', ":1: 'hash_ids' must be"),
    ("[1, 2]\n", ":1: not a JSON object"),
]


@pytest.mark.parametrize(("text", "message"), BAD_TRACE_LINES)
def test_a_malformed_trace_line_exits_2_with_its_line_number_before_any_load(tmp_path, text, message):
    trace = tmp_path / "bad.jsonl"
    trace.write_text(text)
    with LoopbackServer() as srv:
        result = CliRunner().invoke(app, ["--no-color", "bench", "--url", srv.url, "--trace", str(trace)],
                                    env={"COLUMNS": "200"})
        num_requests = len(srv.log)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert num_requests == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--ramp", "sine:1:4:10s"], "unknown ramp shape"),
    (["--ramp", "step:2,x:10s"], "the steps must be"),
    (["--ramp", "linear:4:1:10s"], "START <= END"),
    (["--ramp", "linear:1:2:10s", "--window", "2s"], "same concurrency"),
    (["--ramp", "step:1,2:5parsecs"], "expected a duration"),
    (["--window", "5s"], "--ramp-window sets the report windows"),
    (["--think-time-ms", "10"], "add --turns"),
    (["--turns", "2", "--trace", str(EXAMPLE_TRACE)], "pick one"),
    (["--prefix-groups", "2"], "go together"),
    (["--time-scale", "2"], "add --trace"),
    (["--request-id-header", "bad header"], "not a valid header name"),
    (["--trace", str(EXAMPLE_TRACE), "--time-scale", "1,x"], "expected distinct numbers"),
])
def test_bad_workload_flags_exit_2_before_any_load(args, message):
    with LoopbackServer() as srv:
        result = CliRunner().invoke(app, ["--no-color", "bench", "--url", srv.url, *args], env={"COLUMNS": "200"})
        num_requests = len(srv.log)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert num_requests == 0


def test_turns_that_outgrow_the_context_exit_2_before_the_load(tmp_path):
    with LoopbackServer(max_model_len=256) as srv:
        result = CliRunner().invoke(app, ["--no-color", "bench", "--url", srv.url, "--turns", "4", "--input-len",
                                          "40", "--output-len", "30", "--concurrency", "1"], env={"COLUMNS": "200"})
        load = srv.posts()
    assert result.exit_code == 2 and "max_model_len 256" in " ".join(result.output.split())
    assert load == []
