"""triage: why is my LLM inference slow, and what do I change?"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("triage-llm")
except PackageNotFoundError:  # running from a checkout without an install
    __version__ = "0.1.0"
