"""The base layer: types, errors, JSON I/O and pure facts. It imports nothing else of triage."""
