"""sync vs hts on the variable-step-time DelayEnv (HTS-RL Claim 1); prints JSON lines.

    python bench/hts_speedup.py [--envs 16] [--alpha 5] [--rollouts 40]
"""
from fastrl.bench.hts_speedup import main

if __name__ == "__main__":
    main()
