"""triage: why is my LLM inference slow, and what do I change?"""

# The one place the version is written: pyproject.toml reads it from here (dynamic version).
__version__ = "0.1.0"
