"""What SGLang's log states beyond its start-up phases (triage/engines/log_facts.py): each form is the f-string at
the cited source line (the ledger claim), at 0.4.10.post2 and 0.5.9. SGLang prints no version line; its
`server_args=ServerArgs(...)` line opens each start and carries its settings. The decode-batch line is built from
parts, each a fact of its own."""
from __future__ import annotations

from triage.engines.base import LogForm

_ARGS = "{server_args=}"         # prints `server_args=ServerArgs(model_path=..., ...)`
_NOT_ENOUGH = "Not enough memory. Please try to increase --mem-fraction-static."
_RETRACT = "KV cache pool is full. Retract requests. #retracted_reqs: {num_retracted_reqs},"
_DECODE_OOM = "Decode out of memory. Try to lower your batch size."
LOG_FACTS = {
    "start": (LogForm(None, "server_args=ServerArgs(", "sglang.log-server-args-0.4"),
              LogForm(None, "server_args=ServerArgs(", "sglang.log-server-args")),
    "config": (LogForm(None, "server_args=%s", "sglang.log-server-args-0.4", ("config_text",)),
               LogForm(None, "server_args=%s", "sglang.log-server-args", ("config_text",))),
    "kv_tokens": (LogForm(None, "max_total_num_tokens={self.max_total_num_tokens},",
                          "sglang.log-max-total-num-tokens-0.4", ("kv_tokens",)),
                  LogForm(None, "KV Cache is allocated. #tokens: {size},", "sglang.log-kv-allocated-0.4",
                          ("kv_tokens",)),
                  LogForm(None, "KV Cache is allocated. #tokens: {num_tokens},", "sglang.log-kv-allocated",
                          ("kv_tokens",))),
    # The scheduler's limits line, its fields named as server_config's: the context length it serves, its
    # running-request cap and chunk size as it resolved them (defaults included).
    "settings": (LogForm(None, "max_total_num_tokens={self.max_total_num_tokens}, chunked_prefill_size="
                               "{server_args.chunked_prefill_size}, max_prefill_tokens={self.max_prefill_tokens}, "
                               "max_running_requests={self.max_running_requests}, context_len="
                               "{self.model_config.context_len},", "sglang.log-max-total-num-tokens-0.4",
                         ("", "max_num_batched_tokens", "", "max_num_seqs", "max_model_len")),),
    "startup_failure": (LogForm(None, _NOT_ENOUGH, "sglang.log-not-enough-memory-0.4"),
                        LogForm(None, _NOT_ENOUGH, "sglang.log-not-enough-memory")),
    "retraction": (LogForm(None, _RETRACT, "sglang.log-retract-0.4", ("retracted",)),
                   LogForm(None, _RETRACT, "sglang.log-retract", ("retracted",)),
                   LogForm(None, _DECODE_OOM, "sglang.log-decode-oom-0.4"),
                   LogForm(None, _DECODE_OOM, "sglang.log-decode-oom")),
    "stats": (LogForm(None, "#running-req: {num_running_reqs},", "sglang.log-decode-batch-0.4", ("running",)),
              LogForm(None, "#running-req: {num_running_reqs},", "sglang.log-decode-batch", ("running",))),
    "stats_kv_usage_frac": (LogForm(None, "token usage: {token_usage:.2f},", "sglang.log-decode-batch-tokens-0.4",
                                    ("kv_usage_frac",)),
                            LogForm(None, "token usage: {token_usage:.2f},", "sglang.log-decode-batch-tokens",
                                    ("kv_usage_frac",))),
    "stats_waiting": (LogForm(None, "#queue-req: {len(self.waiting_queue)}", "sglang.log-decode-batch-tail-0.4",
                              ("waiting",)),
                      LogForm(None, "#queue-req: {len(self.waiting_queue)}", "sglang.log-decode-batch-tail",
                              ("waiting",))),
    "stats_generation": (LogForm(None, "gen throughput (token/s): {self.last_gen_throughput:.2f}",
                                 "sglang.log-decode-batch-tail-0.4", ("generation_tokens_per_s",)),),
}
# ServerArgs' fields that are not the flag's name with dashes.
LOG_CONFIG_KEYS = {"model_path": "--model-path"}
