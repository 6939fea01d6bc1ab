"""`triage diagnose`: find the target, run the probes, run the rules, assemble the report."""
from triage.diagnose.pipeline import (  # noqa: F401
    DiagnoseOptions,
    DiagnoseResult,
    collect,
    diagnose,
    discover,
    layer_summary,
    load_snapshot,
    replay,
    unreachable_target,
)
