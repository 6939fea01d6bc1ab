"""`triage bench`'s options, in the groups (and --help panels) that `triage/bench/options.py` types: each
group is {field: (type on the command line, typer.Option)} in the order --help lists them."""
from __future__ import annotations

from pathlib import Path

import typer

from triage.bench.options import (
    LoadOptions,
    OutputOptions,
    ScaleOptions,
    SloOptions,
    TargetOptions,
    WorkloadOptions,
)
from triage.bench.run_config import (
    EMBEDDED_DEFAULTS,
    MIN_REQUESTS_PER_LEVEL,
    REQUESTS_PER_SLOT,
    SECONDS_OF_ARRIVALS,
    URL_DEFAULTS,
)
from triage.cli_support import OptionSpec, format_option, json_option
from triage.core.report import ReportKind

# `triage bench --help` groups its options in these panels, in this order.
TARGET, LOAD, WORKLOAD, SLO, SCALE, OUTPUT = "Target", "Load", "Workload", "SLO & find-max", "Scale", "Output"

TARGET_OPTIONS: OptionSpec = {
    "urls": (list[str], typer.Option(None, "--url", envvar="TRIAGE_URL", metavar="<url>",
             help="Server base URL, e.g. http://127.0.0.1:8000; give it more than once for several replicas. "
                  "Without it, the bundled reference engine is started on a free loopback port.",
             rich_help_panel=TARGET)),
    "urls_file": (Path, typer.Option(None, "--urls", help="A file of replica URLs, one per line (# comments).",
                  rich_help_panel=TARGET)),
    "balance": (str, typer.Option(None, "--balance", help="Several replicas: round-robin or "
                "least-in-flight.", rich_help_panel=TARGET)),
    "model": (str, typer.Option(None, "--model", help="Model name to request (default: the first of /v1/models). "
              "Without --url: the reference engine preset to start (default tiny).", rich_help_panel=TARGET)),
    "endpoint": (str, typer.Option(None, "--endpoint", help="completions or chat.", rich_help_panel=TARGET)),
    "api_key": (str, typer.Option(None, "--api-key", envvar="OPENAI_API_KEY", show_default=False,
                help="Bearer token (or OPENAI_API_KEY). Never written to any output.", rich_help_panel=TARGET)),
    "headers": (list[str], typer.Option(None, "--header", help="Extra header NAME:VALUE (repeatable).",
                rich_help_panel=TARGET)),
    "timeout_s": (float, typer.Option(None, "--timeout", help="Seconds without a byte before a request is a "
                  "timeout.", rich_help_panel=TARGET)),
    "warm_connections": (bool, typer.Option(None, "--warm-connections/--no-warm-connections",
                         help="Open the connection pool to each level's load before its measured window (connect "
                              "time is reported apart from TTFT).", rich_help_panel=TARGET)),
    "request_id_header": (str, typer.Option(None, "--request-id-header",
                          help="Header carrying each request's id (recorded in the JSONL); '' sends none.",
                          rich_help_panel=TARGET)),
}
LOAD_OPTIONS: OptionSpec = {
    "concurrency": (str, typer.Option(None, "--concurrency", help="Closed-loop levels: requests kept in flight "
                    f"(default {URL_DEFAULTS['concurrency']}; without --url: {EMBEDDED_DEFAULTS['concurrency']}).",
                    rich_help_panel=LOAD)),
    "rate": (str, typer.Option(None, "--rate", help="Open-loop levels in requests/s (Poisson), e.g. 1,2,4.",
             rich_help_panel=LOAD)),
    "burstiness": (float, typer.Option(None, "--burstiness", help="Gamma shape of arrival gaps: 1 Poisson, <1 "
                   "burstier.", rich_help_panel=LOAD)),
    "num_requests": (int, typer.Option(None, "--num-requests", help="Requests per level (default: the larger of "
                     f"{MIN_REQUESTS_PER_LEVEL} and {REQUESTS_PER_SLOT} x concurrency, or of {MIN_REQUESTS_PER_LEVEL} and "
                     f"{SECONDS_OF_ARRIVALS} s of arrivals for a rate; without --url: "
                     f"{EMBEDDED_DEFAULTS['num_requests']}).", rich_help_panel=LOAD)),
    "duration_s": (float, typer.Option(None, "--duration", help="Seconds per level instead of a request count.",
                   rich_help_panel=LOAD)),
    "warmup": (int, typer.Option(None, "--warmup", help="Requests sent first and left out of the stats "
               f"(default {URL_DEFAULTS['warmup']}).",
               rich_help_panel=LOAD)),
    "repeat": (int, typer.Option(None, "--repeat", help="Run each level K times, in rounds (level 1, level 2, ..., then "
               "again), so each level's repeats spread over the run; compare uses them as independent samples and "
               "checks them for drift.", rich_help_panel=LOAD)),
    "repeat_order": (str, typer.Option(None, "--repeat-order", help="rounds (the default) or back-to-back: each "
                     "level's K repeats one after the other.", rich_help_panel=LOAD)),
    "seed": (int, typer.Option(None, "--seed", help="Seed for prompts, lengths and arrival times.", rich_help_panel=LOAD)),
    "max_in_flight": (int, typer.Option(None, "--max-in-flight", help="Open loop: most requests in flight at once.",
                      rich_help_panel=LOAD)),
    "ramp": (str, typer.Option(None, "--ramp", help="step:2,4,8:20s (each step a level) or linear:1:20:60s "
             "(reported in --ramp-window windows).", rich_help_panel=LOAD)),
    "window": (str, typer.Option(None, "--ramp-window", "--window", help="Linear ramp: the stretch each reported "
               "window covers, e.g. 10s (default 10s; --window is the older name).", rich_help_panel=LOAD)),
}
WORKLOAD_OPTIONS: OptionSpec = {
    "input_len": (str, typer.Option(None, "--input-len", help="Prompt tokens (default "
                  f"{URL_DEFAULTS['input_len']}; without --url: {EMBEDDED_DEFAULTS['input_len']}). A comma "
                  "list, e.g. 512,2048,8192, sweeps it: every level runs once per length, shortest first (TTFT vs "
                  "context, rule SCHED006).", rich_help_panel=WORKLOAD)),
    "output_len": (int, typer.Option(None, "--output-len", help="Output tokens asked for (default "
                   f"{URL_DEFAULTS['output_len']}; without --url: {EMBEDDED_DEFAULTS['output_len']}).",
                   rich_help_panel=WORKLOAD)),
    "len_dist": (str, typer.Option(None, "--len-dist", help="fixed, uniform, normal or lognormal.",
                 rich_help_panel=WORKLOAD)),
    "shared_prefix_len": (int, typer.Option(None, "--shared-prefix-len", help="Leading prompt tokens shared by all.",
                          rich_help_panel=WORKLOAD)),
    "dataset": (Path, typer.Option(None, "--dataset", help="ShareGPT JSON or JSONL prompts instead of synthetic.",
                rich_help_panel=WORKLOAD)),
    "turns": (int, typer.Option(None, "--turns", help="Multi-turn chat: turns per conversation (history grows; TTFT "
              "per turn). --num-requests counts requests (whole conversations).", rich_help_panel=WORKLOAD)),
    "think_time_ms": (float, typer.Option(None, "--think-time-ms", help="Multi-turn: pause between turns.",
                      rich_help_panel=WORKLOAD)),
    "trace": (Path, typer.Option(None, "--trace", help="Replay a Mooncake-format JSONL trace (timestamp ms, "
              "input_length, output_length, hash_ids); --num-requests cuts it.", rich_help_panel=WORKLOAD)),
    "time_scale": (str, typer.Option(None, "--time-scale", help="Trace replay: multiply the trace's gaps (0.5 = twice "
                   "as fast); a comma list, e.g. 1,0.5, replays once per scale.", rich_help_panel=WORKLOAD)),
    "prefix_groups": (int, typer.Option(None, "--prefix-groups", help="G different shared prefixes across requests "
                      "(with --prefix-len).", rich_help_panel=WORKLOAD)),
    "prefix_len": (int, typer.Option(None, "--prefix-len", help="Tokens of each --prefix-groups prefix.",
                   rich_help_panel=WORKLOAD)),
}
SLO_OPTIONS: OptionSpec = {
    "slo": (str, typer.Option(None, "--slo", help="Goodput SLO, e.g. ttft_ms=500,tpot_ms=50 (e2e_ms too).",
            rich_help_panel=SLO)),
    "find_max": (str, typer.Option(None, "--find-max", help="Search for the highest load (concurrency or rate) "
                 "whose SLO attainment meets --attainment: needs --slo; replaces the level list.", rich_help_panel=SLO)),
    "attainment": (float, typer.Option(None, "--attainment", help="--find-max: share of requests that must meet the "
                   "SLO (failed requests count as misses).", rich_help_panel=SLO)),
    "max_requests": (int, typer.Option(None, "--max-requests", help="--find-max: stop after this many requests.",
                     rich_help_panel=SLO)),
    "max_duration": (str, typer.Option(None, "--max-duration", help="--find-max: stop after this long, e.g. 10m.",
                     rich_help_panel=SLO)),
}
SCALE_OPTIONS: OptionSpec = {
    "workers": (int, typer.Option(None, "--workers", help="Run the load from N processes on this host, each with its own "
                "event loop and a 1/N share, merged into one report (exact percentiles).", rich_help_panel=SCALE)),
    "shard": (str, typer.Option(None, "--shard", help="Run share INDEX/COUNT of the load (one machine of several; "
              "`env`: from JOB_COMPLETION_INDEX and TRIAGE_SHARDS). Needs --url and --output-dir; `triage bench "
              "merge DIR...` joins the shards.", rich_help_panel=SCALE)),
}
OUTPUT_OPTIONS: OptionSpec = {
    "json": (Path, json_option(OUTPUT)),
    "jsonl": (Path, typer.Option(None, "--jsonl", help="Per-request records, flushed as each request finishes.",
              rich_help_panel=OUTPUT)),
    "csv": (Path, typer.Option(None, "--csv", help="One row per level (CSV).", rich_help_panel=OUTPUT)),
    "html": (Path, typer.Option(None, "--html", help="HTML report with plots.", rich_help_panel=OUTPUT)),
    "format": (str, format_option(ReportKind.BENCH, panel=OUTPUT)),
    "output_dir": (Path, typer.Option(None, "--output-dir", help="Write bench.json, requests.jsonl, levels.csv and "
                   "report.html here; --json, --jsonl and --csv given too get copies.", rich_help_panel=OUTPUT)),
}

BENCH_GROUPS = {
    "target": (TargetOptions, TARGET_OPTIONS), "load": (LoadOptions, LOAD_OPTIONS),
    "workload": (WorkloadOptions, WORKLOAD_OPTIONS), "slo": (SloOptions, SLO_OPTIONS),
    "scale": (ScaleOptions, SCALE_OPTIONS), "output": (OutputOptions, OUTPUT_OPTIONS),
}
