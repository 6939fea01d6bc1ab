"""What the common NVIDIA Xids mean (NVIDIA's Xid catalogue). Pure data: the kernel_log probe labels its
events with it and rule GPU006 names them with it."""
from __future__ import annotations

XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception (often an application bug)", 31: "GPU memory page fault (often an application bug)",
    43: "GPU stopped processing", 45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error", 61: "internal micro-controller breakpoint", 62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping event", 64: "ECC page retirement or row remapper failure",
    74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
    94: "contained ECC error", 95: "uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error",
}
