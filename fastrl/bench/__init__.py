"""``fastrl bench``: each module measures one thing and prints JSON (``add_arguments`` and ``run``, wired
into the CLI by ``fastrl.cli``); ``bench/`` at the top of a checkout has a script per results table."""

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
