"""Gradient all-reduce per update, 1 and 2 ranks on localhost (gloo), projected to 8 and 64 nodes; prints JSON.

    python bench/multinode.py [--repeats 30] [--sizes 4K ... 16M] [--alpha-us US --bandwidth-gbps GBPS]
"""
from fastrl.bench.multinode import main

if __name__ == "__main__":
    main()
