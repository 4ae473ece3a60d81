"""The benchmarks' plumbing (fastrl/bench), never their speed: speed is measured in bench/."""
