"""Server state per level from /metrics scrapes (the shared parser) and GPU state from NVML (a fake module with
pynvml's real function names)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from triage.bench.server_scrape import GpuSampler, gpu_summary, server_summary
from triage.probes.nvml import decode_clock_event_reasons as clock_event_names

PROM = Path(__file__).parent / "fixtures" / "prom"


def test_server_summary_from_two_real_format_scrapes():
    before = (PROM / "vllm_v1_two_engines_before.txt").read_text()
    after = (PROM / "vllm_v1_two_engines_after.txt").read_text()
    server, reason = server_summary([(0.0, before), (10.0, after)], client_ttft_ms_mean=1300.0)
    assert reason is None
    assert server.engine == "vllm"
    assert server.num_preemptions_delta == 30.0            # (25 + 10) - (5 + 0)
    assert server.prefix_cache_hit_rate == pytest.approx(0.25)  # (1200 - 200) / (6000 - 2000)
    assert server.server_ttft_ms_mean == pytest.approx(1200.0)  # (140 - 20) s / (200 - 100)
    assert server.client_minus_server_ttft_ms == pytest.approx(100.0)
    assert server.prompt_tokens_delta == 20000.0 and server.generation_tokens_delta == 5000.0
    assert server.kv_cache_usage_frac_max == pytest.approx(0.97)
    assert server.num_requests_waiting_max == 7.0
    assert server.window_s == 10.0


def test_gauge_means_use_the_scrapes_taken_during_the_level():
    def text(running: int) -> str:
        return f'vllm:num_requests_running{{engine="0"}} {running}\nvllm:kv_cache_usage_perc{{engine="0"}} 0.5\n'

    server, _ = server_summary([(0, text(0)), (1, text(4)), (2, text(8)), (3, text(0))], None)
    assert server.num_requests_running_mean == 6.0  # idle bracketing scrapes left out
    assert server.num_requests_running_max == 8.0
    assert server.client_minus_server_ttft_ms is None


def test_server_summary_degrades_with_a_reason():
    assert server_summary([(0, "x 1\n")], None) == (None, "server metrics unavailable: fewer than two scrapes")
    server, reason = server_summary([(0, "foo 1\n"), (1, "foo 2\n")], None)
    assert server is None and "no vLLM, SGLang or TGI" in reason


class FakeNvml:
    """The pynvml functions the sampler calls, for two GPUs; GPU 1 does not support power readings."""

    NVML_CLOCK_SM = 1

    class NVMLError(Exception):
        pass

    def __init__(self, fail_init: bool = False):
        self.fail_init = fail_init

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=[80, 40][h], memory=10)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=[10 * 2**30, 20 * 2**30][h], total=80 * 2**30, free=0)

    def nvmlDeviceGetPowerUsage(self, h):
        if h == 1:
            raise self.NVMLError("Not Supported")
        return 300_000  # milliwatts

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == self.NVML_CLOCK_SM
        return 1410

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x4 | 0x40 if h == 0 else 0x1


def test_gpu_sampler_with_an_injected_nvml_module():
    sampler, reason = GpuSampler.create(nvml=FakeNvml())
    assert reason is None
    sampler.sample_once()
    sampler.sample_once()
    gpu = gpu_summary(sampler.samples)
    assert gpu.num_samples == 4 and gpu.num_gpus == 2
    assert gpu.utilization_gpu_pct_mean == 60.0 and gpu.utilization_gpu_pct_max == 80.0
    assert gpu.memory_used_bytes_max == 20 * 2**30
    assert gpu.power_usage_w_mean == 300.0  # GPU 1's unsupported power is left out, not zero
    assert gpu.sm_clock_mhz_mean == 1410.0
    assert gpu.clock_event_reasons_seen == ("gpu_idle", "hw_thermal_slowdown", "sw_power_cap")


def test_gpu_sampler_thread_collects_until_stopped():
    sampler, _ = GpuSampler.create(interval_s=0.01, nvml=FakeNvml())
    sampler.start()
    import time
    deadline = time.monotonic() + 10.0  # a deadline, not a fixed sleep: a loaded box may starve the thread
    while len(sampler.samples) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    gpu = sampler.stop()
    assert gpu.num_samples >= 4
    after_stop = len(sampler.samples)
    time.sleep(0.05)
    assert len(sampler.samples) == after_stop  # stopped means stopped


def test_missing_nvml_gives_none_with_the_reason():
    sampler, reason = GpuSampler.create(nvml=FakeNvml(fail_init=True))
    assert sampler is None and "NVML Shared Library Not Found" in reason
    assert gpu_summary([]) is None
    assert clock_event_names(0x8 | 0x20) == ["hw_slowdown", "sw_thermal_slowdown"]


@pytest.mark.parametrize("fixture, engine", [("sglang_busy.txt", "sglang"), ("tgi_queueing.txt", "tgi")])
def test_other_engines_are_read_through_the_shared_parser(fixture, engine):
    text = (PROM / fixture).read_text()
    server, reason = server_summary([(0.0, text), (1.0, text)], client_ttft_ms_mean=50.0)
    assert reason is None and server.engine == engine
    assert server.num_requests_running_max is not None  # gauges read from the engine's own names


def test_last_scrape_waits_for_the_server_to_count_the_last_requests():
    """The client saw 4 requests succeed; the server counts the 4th only on the third scrape."""
    import asyncio

    import httpx

    from triage.bench.server_scrape import ServerScraper

    finished = iter([0, 3, 4, 4])

    def metrics(request: httpx.Request) -> httpx.Response:
        n = next(finished)
        text = ("# TYPE vllm:request_success_total counter\n"
                f'vllm:request_success_total{{finished_reason="length",model_name="m"}} {n}\n'
                "# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="m"}} {12 * n}\n')
        return httpx.Response(200, text=text)

    async def main():
        async with httpx.AsyncClient(transport=httpx.MockTransport(metrics), base_url="http://x") as client:
            watcher = ServerScraper(client, interval_s=60.0)
            await watcher.start()
            await watcher.stop(expected_finished=4)
            return watcher

    watcher = asyncio.run(main())
    assert len(watcher.texts) == 2  # the early last scrape was replaced, not kept
    server, reason = watcher.summary(None)
    assert reason is None and server.generation_tokens_delta == 48
    assert server.num_requests_finished_delta == 4


class OldDriverNvml(FakeNvml):
    """No ClocksEvent call (an old binding), ThrottleReasons instead; GPU 1 falls off the bus after one sample."""

    nvmlDeviceGetCurrentClocksEventReasons = None

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self):
        super().__init__()
        self.reads = 0

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0x8

    def nvmlDeviceGetUtilizationRates(self, h):
        if h == 1:
            self.reads += 1
            if self.reads > 1:
                raise self.NVMLError(15)  # NVML_ERROR_GPU_IS_LOST
        return super().nvmlDeviceGetUtilizationRates(h)


def test_gpu_sampler_falls_back_to_throttle_reasons_and_stops_reading_a_lost_gpu():
    nvml = OldDriverNvml()
    sampler, reason = GpuSampler.create(nvml=nvml)
    assert reason is None
    for _ in range(3):
        sampler.sample_once()
    gpu = gpu_summary(sampler.samples, sampler.lost)
    assert gpu.clock_event_reasons_seen == ("hw_slowdown",)
    assert gpu.num_samples == 4 and gpu.lost_gpu_indices == (1,)
    assert nvml.reads == 2  # once lost, GPU 1 is not read again
