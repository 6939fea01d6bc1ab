"""`triage serve`: the reference engine behind an OpenAI-compatible HTTP API (server.py), its wire
format, metrics, start-up and engine thread (server_*.py), and the child-process launcher
(launcher.py) that `triage bench` and the tests start it with."""
