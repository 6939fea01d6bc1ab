"""Eight days of vLLM and dcgm-exporter series in OpenMetrics text, with a TTFT jump planted in the last
hour, for `promtool tsdb create-blocks-from openmetrics` (tests/test_history_prometheus.py).

Two instances: `traffic` (the jump comes with 50% more requests and prompts twice as long) and `server`
(the same traffic; the GPU's SM clock drops from 1980 to 1400 MHz). Counters grow by a fixed amount per
step, so rates over any window inside one regime are exact."""
from __future__ import annotations

STEP_S = 120
DAYS = 8
JUMP_S = 3600                      # the last hour is different
BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5)
TTFT_BEFORE = (0.50, 0.80, 0.95, 0.995, 1.0)      # cumulative share of requests at or below each bucket
TTFT_AFTER = (0.20, 0.45, 0.70, 0.93, 0.995)
RPS, PROMPT_TOKENS, OUTPUT_TOKENS = 20.0, 1000.0, 200.0

# instance -> (requests/s after, prompt tokens per request after, SM clock after)
INSTANCES = {"traffic": (30.0, 2000.0, 1980.0), "server": (20.4, 1000.0, 1400.0)}


def _regime(instance: str, t: float, end: float) -> tuple[float, float, tuple[float, ...], float]:
    if t <= end - JUMP_S:
        return RPS, PROMPT_TOKENS, TTFT_BEFORE, 1980.0
    rps, prompt, clock = INSTANCES[instance]
    return rps, prompt, TTFT_AFTER, clock


def openmetrics(end_epoch_s: int) -> str:
    steps = DAYS * 86400 // STEP_S
    times = [end_epoch_s - (steps - i) * STEP_S for i in range(steps + 1)]
    out: list[str] = []

    def family(name: str, kind: str, rows) -> None:
        out.append(f"# TYPE {name} {kind}")
        out.extend(rows)

    def counters(metric: str, per_request) -> list[str]:
        rows = []
        for inst in INSTANCES:
            total = 0.0
            for t in times:
                rps, prompt, _, _ = _regime(inst, t, end_epoch_s)
                total += rps * STEP_S * per_request(prompt)
                rows.append(f'{metric}_total{{instance="{inst}",model_name="m"}} {total:.1f} {t}')
        return rows

    family("vllm:request_success", "counter", counters("vllm:request_success", lambda p: 1.0))
    family("vllm:prompt_tokens", "counter", counters("vllm:prompt_tokens", lambda p: p))
    family("vllm:generation_tokens", "counter", counters("vllm:generation_tokens", lambda p: OUTPUT_TOKENS))
    rows = []
    for inst in INSTANCES:
        count = total_s = 0.0
        buckets = [0.0] * len(BUCKETS)
        for t in times:
            rps, _, shares, _ = _regime(inst, t, end_epoch_s)
            n = rps * STEP_S
            for i, share in enumerate(shares):
                buckets[i] += n * share
            count += n
            total_s += n * (0.15 if shares is TTFT_BEFORE else 0.45)
            labels = f'instance="{inst}",model_name="m"'
            for le, value in zip(BUCKETS, buckets, strict=True):
                rows.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {value:.1f} {t}')
            rows.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {count:.1f} {t}')
            rows.append(f"vllm:time_to_first_token_seconds_count{{{labels}}} {count:.1f} {t}")
            rows.append(f"vllm:time_to_first_token_seconds_sum{{{labels}}} {total_s:.1f} {t}")
    family("vllm:time_to_first_token_seconds", "histogram", rows)
    for name, value in (("vllm:num_requests_running", lambda rps, clock: rps / 2),
                        ("vllm:num_requests_waiting", lambda rps, clock: 1.0 if rps <= 21 else 6.0),
                        ("vllm:kv_cache_usage_perc", lambda rps, clock: 0.5 if rps <= 21 else 0.8)):
        rows = []
        for inst in INSTANCES:
            for t in times:
                rps, _, _, clock = _regime(inst, t, end_epoch_s)
                rows.append(f'{name}{{instance="{inst}",model_name="m"}} {value(rps, clock)} {t}')
        family(name, "gauge", rows)
    rows = []
    for inst in INSTANCES:
        for t in times:
            clock = _regime(inst, t, end_epoch_s)[3]
            rows.append(f'DCGM_FI_DEV_SM_CLOCK{{Hostname="{inst}",gpu="0"}} {clock} {t}')
    family("DCGM_FI_DEV_SM_CLOCK", "gauge", rows)
    out.append("# EOF")
    return "\n".join(out) + "\n"
