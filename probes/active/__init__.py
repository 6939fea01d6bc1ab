"""Active probes (`triage diagnose --active`): they load the hardware for a few seconds and measure what
it moves, where the passive probes only read counters. Each returns a ProbeResult like the passive ones
and degrades per field; the GPU ones say `unsupported` with the reason where there is no CUDA GPU.

host_memory.py is also the one host memory bandwidth implementation: the passive `memory` probe's copy
figure and `triage baseline`'s CPU microbenchmark call it.
"""
