"""The references for Atari stepping: raw ALE on every core and ale-py's AtariVectorEnv.

    python bench/raw_ale.py [--game pong] [--seconds 5] [--num-envs 16]
"""
from fastrl.bench.references import main

if __name__ == "__main__":
    main()
