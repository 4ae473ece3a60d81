"""Time to a score: train until the mean raw score over the last W episodes reaches R, or M minutes; one JSON line.

    python bench/time_to_score.py configs/pong_hts.toml --target 18 --max-minutes 60 [--window 20]
"""
from fastrl.bench.time_to_score import main

if __name__ == "__main__":
    main()
