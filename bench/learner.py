"""A config's training step and actor forward: eager vs compiled, fp32 vs bf16, by thread count; one JSON line.

    python bench/learner.py [CONFIG] [--set k=v] [--seconds 3] [--threads 1 2]
"""
from fastrl.bench.learner import main

if __name__ == "__main__":
    main()
