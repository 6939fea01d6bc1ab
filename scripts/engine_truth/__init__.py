"""The pieces of scripts/extract_engine_truth.py, one job per module:

releases.py (which versions and files) -> archives.py (download, read) -> symbols.py (resolve names
and annotations with `ast`) -> argparse_flags.py / annotated_flags.py / metrics.py (what an engine
declares) -> vllm.py / sglang.py / tgi.py (one table per engine version) -> cli.py (the command line).
"""
