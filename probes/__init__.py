"""Probes: the only code in triage that reads the system. Each returns a ProbeResult, never raises."""

if __name__ != "triage.probes":  # one package, one import name: `probes` from the repository root is a second copy
    raise ImportError(f"import triage.probes, not {__name__}: this folder installs as triage.probes, and a second "
                      "name would load a second copy (a second registry)")

