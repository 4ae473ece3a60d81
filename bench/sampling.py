"""Whole-engine Atari sampling speed vs the raw emulator and AtariVectorEnv, one JSON line.

    python bench/sampling.py configs/pong_hts.toml --seconds 10 --policy random
"""
from fastrl.bench.sampling import main

if __name__ == "__main__":
    main()
