"""What the multi-agent tests share (tests/layers/): short Connect Four runs of configs/connect_four_selfplay.toml,
runs of tests/helpers/agents_env.py's agents that leave early, and a run's parameters compared bit for bit."""

import torch

import fastrl
from fastrl.runs.checkpoint import load_checkpoint

CONNECT_FOUR = "pettingzoo.classic:connect_four_v3"
LEAVING = "tests.helpers.agents_env:leaving_agents"
SMALL = ["run.progress=false", "run.tensorboard=false", "run.log_interval_s=0.5", "engine.rollout=8",
         "algo.minibatches=2"]
# the shipped config's random and scripted players off: a test adds the players it is about
NO_FIXED_PLAYERS = ["selfplay.random_share=0", "selfplay.scripted=''", "selfplay.scripted_share=0"]
MLP = ["model.name='mlp'", "model.hidden=[256, 256]"]  # for rows without a board
POOL = ["selfplay.opponents='pool'", "selfplay.pool_size=3", "selfplay.snapshot_every=2"]


def c4_run(tmp_path, name, *overrides):
    """Connect Four against the shared policy (the overrides may make it a pool), 8 envs, into tmp_path / name."""
    run_dir = tmp_path / name
    summary = fastrl.train("configs/connect_four_selfplay.toml",
                           [*SMALL, "engine.envs=8", *NO_FIXED_PLAYERS, "selfplay.opponents='shared'", *overrides],
                           run_dir=run_dir)
    return summary, run_dir


def leaving_run(tmp_path, name, *overrides, mode="sync"):
    """6 envs of 3 agents that leave early (their observations NaN from then on), 960 rows, an MLP."""
    run_dir = tmp_path / name
    summary = fastrl.train("configs/connect_four_selfplay.toml", [
        *SMALL, f"env.id='{LEAVING}'", "env.backend='pettingzoo'", *NO_FIXED_PLAYERS, *MLP,
        "selfplay.opponents='shared'",
        "env.kwargs={agents=3, life=4}", "engine.envs=6", f"engine.mode='{mode}'", "run.total_frames=960",
        *overrides], run_dir=run_dir)
    return summary, run_dir


def model_params(run_dir) -> dict:
    return load_checkpoint(run_dir)["model"]


def identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
