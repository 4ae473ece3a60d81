"""gala ring vs allreduce with one slow learner (GALA's straggler claim); prints one JSON line.

    python bench/gala_straggler.py [--step-s 0.02 0.002 0.002 0.002] [--seconds 20] [--staleness 16]
"""
from fastrl.bench.gala_straggler import main

if __name__ == "__main__":
    main()
