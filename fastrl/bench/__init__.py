"""``fastrl bench``: each module measures one thing and prints JSON (``add_arguments`` and ``run``, wired
into the CLI by ``fastrl.cli``); ``bench/`` at the top of a checkout has a script per results table."""

from collections.abc import Callable


def report(measure: Callable[[], dict], shown: Callable[[dict], dict] = lambda result: result) -> int:
    """A training benchmark's ``run``: ``measure()`` printed as one JSON line (``shown`` of it), exit 0; bad input
    named on stderr, exit 2; a failed or interrupted run's message and exit code."""
    import json
    import sys

    from fastrl.config import ConfigError
    from fastrl.process.faults import RunFailed, RunInterrupted

    try:
        result = measure()
    except ConfigError as exc:
        print(f"fastrl: bad config: {exc}", file=sys.stderr)
        return 2
    except (RunFailed, RunInterrupted) as exc:
        print(f"\nfastrl: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(shown(result)))
    return 0


# The engine benchmarks on toy envs (hts-speedup, policy-lag, gala-straggler) learn with A2C, as their
# published figures were measured: the settings they take from outside the schema's defaults (which are
# the default job's PPO).
A2C_SETTINGS = [
    "algo.name='a2c'",
    "algo.lr=7e-4",
    "algo.optimizer='rmsprop'",
    "algo.lr_schedule='constant'",
    "engine.micro_batch=16",
    "model.normalize_obs=false",
]
