"""The typed probe -> rule contract: one payload type per probe, in the base layer so that both
probes (who build them) and rules (who read them) import it. docs/SNAPSHOT.md and the probe-data part
of the report JSON Schema are generated from these types (scripts/gen_probe_docs.py)."""
from __future__ import annotations

from typing import Any

from triage.core.probe_data.active import (
    AllreduceData,
    AllreduceRun,
    CudaDevice,
    HbmData,
    HbmGpu,
    HostMemoryData,
    MatmulData,
    MatmulGpu,
    NodeBandwidth,
    PcieData,
    PcieGpu,
)
from triage.core.probe_data.artifacts import ArtifactRead, ArtifactsData
from triage.core.probe_data.base import Payload
from triage.core.probe_data.gpu import (
    GpuData,
    GpuDevice,
    GpuPair,
    GpuProcess,
    NvLink,
    NvLinkErrors,
    ThrottleTimes,
)
from triage.core.probe_data.history import PromHistoryData
from triage.core.probe_data.host import CpuData, MemoryData, NetworkData, NumaNode, StorageData
from triage.core.probe_data.logs import (
    KernelLogData,
    LogEvent,
    LogsData,
    LogStatsSample,
    StartupData,
    StartupPhase,
    XidEvent,
)
from triage.core.probe_data.serving import (
    BatchingSettings,
    EngineIdentityData,
    Histograms,
    HistogramWindow,
    KvOffloadWindow,
    KvTransferWindow,
    LlamaCppSlotsData,
    ProcessInfo,
    RankWindow,
    ServerConfigData,
    ServerMetricsData,
    ServerProcessData,
)
from triage.core.probe_data.topology import PeerWindow, ServerPeersData, TopologyData

PAYLOAD_TYPES: dict[str, type[Payload]] = {t.PROBE: t for t in (
    GpuData, KernelLogData, CpuData, ServerProcessData, MemoryData, StorageData, NetworkData,
    ServerMetricsData, ServerConfigData, LogsData, EngineIdentityData, PromHistoryData, ServerPeersData,
    TopologyData, HostMemoryData, PcieData, HbmData, MatmulData, AllreduceData, ArtifactsData)}


def read_payload(probe: str, data: Any, where: str = "probe data") -> Any:
    """A report's `data` object as the probe's payload type (lenient: 0.1.0 reports and newer 1.x
    minors both read). An empty object is None; an unknown probe keeps its plain dict."""
    if data is None or isinstance(data, Payload):
        return data
    if isinstance(data, dict) and not data:
        return None
    cls = PAYLOAD_TYPES.get(probe)
    if cls is None:
        return data
    return cls.read(data, where)


__all__ = [
    "PAYLOAD_TYPES", "Payload", "read_payload", "ArtifactRead", "ArtifactsData",
    "GpuData", "GpuDevice", "GpuPair", "GpuProcess", "NvLink", "NvLinkErrors", "ThrottleTimes",
    "CpuData", "MemoryData", "NetworkData", "NumaNode", "StorageData",
    "KernelLogData", "LogEvent", "LogStatsSample", "LogsData", "StartupData", "StartupPhase", "XidEvent", "PromHistoryData",
    "BatchingSettings", "EngineIdentityData", "Histograms", "HistogramWindow", "LlamaCppSlotsData", "ProcessInfo", "ServerConfigData", "ServerMetricsData", "ServerProcessData",
    "KvOffloadWindow", "KvTransferWindow", "RankWindow", "PeerWindow", "ServerPeersData", "TopologyData",
    "AllreduceData", "AllreduceRun", "CudaDevice", "HbmData", "HbmGpu", "HostMemoryData", "MatmulData", "MatmulGpu",
    "NodeBandwidth", "PcieData", "PcieGpu",
]
