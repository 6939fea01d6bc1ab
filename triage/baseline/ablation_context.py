"""What every ablation gets: the config, the model's shapes, the host's measured limits, progress."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from triage.baseline.config import BaselineConfig
from triage.reference_engine.host.microbench import MicrobenchResult
from triage.reference_engine.models.model_config import ModelConfig


@dataclass(slots=True)
class Context:
    cfg: BaselineConfig
    model_config: ModelConfig
    microbench: MicrobenchResult
    on_step: Callable[[str], None] = lambda _msg: None
    # Filled as rows run, read by the report section: per-row tables, GPU-only timings, reasons.
    extras: dict[str, object] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return torch.cuda.is_available()

    def bandwidth_bytes_per_s(self) -> float | None:
        bw = self.microbench.bandwidth_for(self.cfg.device.split(":")[0])   # measured per kind: "cpu", "cuda"
        return None if bw is None else bw.best_bytes_per_s
