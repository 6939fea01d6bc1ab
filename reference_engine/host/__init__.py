"""What this host delivers, measured: torch thread counts that fit it (threads.py), memory bandwidth
and matmul throughput (microbench.py), and the compute dtype chosen by timing (dtype_choice.py)."""
