"""Measured policy lag of async (IMPALA) vs number of envs, next to hts (1) and sync (0); JSON lines.

    python bench/policy_lag.py [--envs 4 8 16 32] [--frames 60000] [--batch-slots 4]
"""
from fastrl.bench.policy_lag import main

if __name__ == "__main__":
    main()
