"""Probes: the only code in triage that reads the system. Each returns a ProbeResult, never raises."""
