"""What TGI's log states beyond its start-up phases (triage/engines/log_facts.py): each form is the string at the
cited source line (the ledger claim), at v2.0.4 and v3.3.7. The launcher prints its arguments with `{:#?}`, a
Rust pretty Debug print that opens with `Args {` and spans one line per field. TGI prints no version line.
A fact named `startup_failure.<phase>` states the start-up phase it struck in."""
from __future__ import annotations

from triage.engines.base import LogForm

_PREFILL_OOM = ("Not enough memory to handle {num_tokens} prefill tokens. You need to decrease "
                "`--max-batch-prefill-tokens`")
_PREFILL_OOM_2_0 = ("Not enough memory to handle {len(batch.input_ids)} prefill tokens. You need to decrease "
                    "`--max-batch-prefill-tokens`")
LOG_FACTS = {
    "start": (LogForm(None, "Args {", "tgi.log-args-2.0"), LogForm(None, "Args {", "tgi.log-args")),
    "config": (LogForm(None, "Args {", "tgi.log-args-2.0"), LogForm(None, "Args {", "tgi.log-args")),
    # The KV budget the warm-up found: the batch's total tokens (claim tgi.batch-max-total-tokens for its meaning).
    "kv_tokens": (LogForm(None, "Setting max batch total tokens to {max_supported_batch_total_tokens}",
                          "tgi.log-max-batch-2.0", ("kv_tokens",)),
                  LogForm(None, "Setting max batch total tokens to {max_supported_batch_total_tokens}",
                          "tgi.log-max-batch", ("kv_tokens",))),
    "startup_failure.warmup": (
        LogForm(None, _PREFILL_OOM_2_0, "tgi.log-prefill-oom-2.0", ("prefill_tokens",)),
        LogForm(None, _PREFILL_OOM, "tgi.log-prefill-oom", ("prefill_tokens",)),
        LogForm(None, "Not enough memory to handle `max_total_tokens={0}`", "tgi.log-not-enough-memory-max-total",
                ("max_total_tokens",)),
        LogForm(None, "Unable to warmup the Python model shards: {0}", "tgi.log-warmup-error-2.0", ("reason_text",)),
        LogForm(None, "Unable to warmup the Python model shards: {0}", "tgi.log-warmup-error", ("reason_text",))),
    "startup_failure.cuda_graph": (LogForm(None, "Decode cuda graph warmup failed", "tgi.log-decode-graph-oom"),),
}
