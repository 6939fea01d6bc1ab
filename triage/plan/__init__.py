"""`triage plan`: the seeds' sizing math as a calculator.

    from triage.plan.section import RawOptions, plan_section
    section = plan_section(RawOptions(model="llama-3.1-70b", gpu="h100-sxm", dtype="fp8"))

Does it fit, how much KV cache is left, which TP, how fast (roofline), how many GPUs for a QPS, what
it costs, and the vLLM flags to start with. Pure arithmetic over spec-sheet figures; nothing is
measured (`triage baseline` measures).
"""
