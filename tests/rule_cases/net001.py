"""NET001, slow model storage (rules/catalog/net001_slow_model_storage.py): its fixture cases."""
from __future__ import annotations

from tests.rule_cases._build import (
    FIRES,
    PASSES,
    Case,
    case,
    snapshot,
    storage,
)

CODE = "NET001"


def cases() -> list[Case]:
    return [
        case("positive_nfs", "Model directory on NFS, 180 MB/s cold read",
             {**FIRES, "certainty": "confirmed", "evidence_keys": ["storage.model_dir_fstype", "storage.read_gbps"]},
             snapshot(storage(model_dir_fstype="nfs4", model_dir_is_network_fs=True, read_gbps=0.18))),
        case("negative_local_nvme", "Local ext4 at 3.1 GB/s", PASSES, snapshot()),
        case("negative_warm_cache_local", "A slow figure from a warm page cache on local disk is not evidence",
             {"fires": False, "skipped_reason": "page cache"},
             snapshot(storage(read_gbps=0.5, page_cache_warm=True))),
    ]
