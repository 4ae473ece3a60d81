"""Which checkpoint a target names: a run directory, its ``checkpoints`` folder or a checkpoint file,
and ``params``, which parameters of the run: ``"auto"`` the target's own checkpoint; for ``gala``
runs (several learners) ``"average"`` the top-level checkpoint, which holds the average of the
learners' parameters and a ``gala`` key, and ``"learner-<i>"`` (or ``"<i>"``) learner i's own
``checkpoints/learner-<i>/latest.pt``; for runs with named policies (``multiagent.policies``)
``"policy-<name>"`` that policy's parameters. ``fastrl eval``, ``fastrl export`` and ``fastrl.load_policy``
resolve their target here, alike.

A checkpoint comes from whoever shared the run: it is read as tensors and plain data only, and a
``module:factory`` its config names (an env or a model: code that rebuilding the policy imports and
calls, with the config's kwargs) is called only when the caller says it trusts it (``trust_code``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from fastrl.config import Config, ConfigError, config_from_dict
from fastrl.runs.checkpoint import LATEST, checkpoint_file

_LEARNER = re.compile(r"^learner-(\d+)$")
_POLICY = re.compile(r"^policy-(.+)$")
_PARAMS_ALLOWED = "'auto', 'average', 'learner-<i>' (or just '<i>') or 'policy-<name>'"


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory a target belongs to, or None (a checkpoint file outside any run).

    A run directory holds ``checkpoints/``; a top-level checkpoint is ``RUN/checkpoints/<file>``
    and a gala learner's is ``RUN/checkpoints/learner-<i>/<file>``.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "checkpoints").is_dir():
            return path
        folder = path
    else:
        folder = path.parent
    if folder.name == "checkpoints":
        return folder.parent
    if _LEARNER.match(folder.name) and folder.parent.name == "checkpoints":
        return folder.parent.parent
    return None


def learner_index(params: str) -> int | None:
    """``"learner-3"`` or ``"3"`` -> 3; anything else -> None."""
    text = params.strip()
    m = _LEARNER.match(text)
    if m:
        return int(m[1])
    if text.isdigit():
        return int(text)
    return None


def learners_of(run_dir: Path) -> list[int]:
    """The learners with a checkpoint of their own in a (gala) run, sorted."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = (_LEARNER.match(p.name) for p in folder.iterdir() if (p / LATEST).is_file())
    return sorted(int(m[1]) for m in found if m)


def resolve_checkpoint(target: str | Path, params: str | int = "auto") -> tuple[Path, str]:
    """-> (the checkpoint file to evaluate, ``"auto"``, ``"average"`` or ``"learner-<i>"``).

    Once the file is loaded, ``"auto"`` becomes what it holds and ``"average"`` is checked
    (the file must carry a ``gala`` key).
    """
    if isinstance(params, (int, np.integer)) and not isinstance(params, bool):
        params = str(params)  # learner i
    if not isinstance(params, str):
        raise ConfigError(f"params = {params!r}: expected {_PARAMS_ALLOWED}")
    target = Path(target)
    try:
        exists = target.exists()
    except OSError as exc:  # a name too long, a loop of links: no run there either
        raise ConfigError(f"nothing to evaluate at {str(target)!r}: {exc.strerror}") from None
    if not exists:
        raise ConfigError(f"nothing to evaluate at {str(target)!r}: no such run directory or checkpoint file")
    own = checkpoint_file(target)
    run_dir = run_dir_of(target)
    if params == "auto" or _POLICY.match(params):  # a named policy's parameters are in the target's checkpoint
        if not own.is_file():
            raise ConfigError(f"nothing to evaluate at {str(target)!r}: no checkpoint {str(own)!r}")
        return own, params
    if params == "average":
        if own.is_file() and not _LEARNER.match(own.parent.name):  # the target is a top-level checkpoint
            return own, "average"
        if run_dir is None or not (run_dir / "checkpoints" / LATEST).is_file():
            raise ConfigError(f"--params average: {str(target)!r} is not in a run directory with checkpoints/{LATEST}")
        return run_dir / "checkpoints" / LATEST, "average"
    index = learner_index(params)
    if index is None:
        raise ConfigError(f"params = {params!r} is not one of {_PARAMS_ALLOWED}")
    name = f"learner-{index}"
    if own.is_file() and own.parent.name == name:  # the target is one of this learner's own checkpoints
        return own, name
    if run_dir is None:
        raise ConfigError(f"--params {params}: {str(target)!r} is not in a run directory (one holding checkpoints/)")
    path = run_dir / "checkpoints" / name / LATEST
    if not path.is_file():
        learners = learners_of(run_dir)
        if learners:
            have = ", ".join(f"learner-{i}" for i in learners)
            raise ConfigError(
                f"--params {params}: run {str(run_dir)!r} has no {name} checkpoint ({path}); its learners are {have}"
            )
        raise ConfigError(
            f"--params {params}: run {str(run_dir)!r} has one learner (no checkpoints/learner-<i>/); "
            "--params learner-<i> applies to gala runs"
        )
    return path, name


def load_checkpoint_of(path: Path, which: str, trust_code: bool = False) -> tuple[dict, Config, str]:
    """``trust_code``: call the ``module:factory`` code the checkpoint's config names (else refused)."""
    from fastrl.runs.checkpoint import load_checkpoint

    if not isinstance(trust_code, bool):
        raise ConfigError(f"trust_code = {trust_code!r}: expected True or False")
    checkpoint = load_checkpoint(path)  # tensors and plain data only, or a ConfigError naming the file
    if not isinstance(checkpoint, dict) or not all(isinstance(checkpoint.get(k), dict) for k in ("model", "config")):
        raise ConfigError(
            f"checkpoint {str(path)!r} holds no 'model' parameters and 'config' (not a fastrl checkpoint?)"
        )
    gala = checkpoint.get("gala")
    if which == "average" and gala is None:
        raise ConfigError(f"checkpoint {str(path)!r}: this run has one learner; --params average applies to gala runs")
    if which == "auto":
        which = "average" if gala is not None else "model"
        if _LEARNER.match(path.parent.name):
            which = path.parent.name
    try:
        config = config_from_dict(checkpoint["config"])
    except ConfigError as exc:
        raise ConfigError(f"checkpoint {str(path)!r}: its config cannot be used: {exc}") from None
    policy = _POLICY.match(which)
    if policy:
        checkpoint, which = _with_named_policy(checkpoint, config, policy[1], path), "model"
    named = code_named_by(config)
    if named and not trust_code:
        raise ConfigError(
            f"checkpoint {str(path)!r} names code to import and call: {'; '.join(named)}. A checkpoint's config "
            "comes with the file, so fastrl calls what it names only when told to: once you know that code, "
            "pass --trust-code (Python: trust_code=True)"
        )
    return checkpoint, config, which


def _with_named_policy(checkpoint: dict, config: Config, name: str, path: Path) -> dict:
    """The checkpoint with named policy ``name``'s parameters as its ``model`` (``multiagent.policies``)."""
    mapping = config.multiagent.policies
    if not mapping:
        raise ConfigError(f"--params policy-{name}: checkpoint {str(path)!r} is of a run without multiagent.policies")
    if name not in mapping.values():
        raise ConfigError(
            f"--params policy-{name}: the run's policies are {', '.join(dict.fromkeys(mapping.values()))}"
        )
    if name in config.multiagent.frozen:
        raise ConfigError(
            f"--params policy-{name}: a frozen policy; play its own checkpoint, {config.multiagent.frozen[name]!r}"
        )
    runs_own = next(p for p in mapping.values() if p not in config.multiagent.frozen)  # in the env's agent order
    if name == runs_own:
        return checkpoint
    learning = ((checkpoint.get("resume") or {}).get("policies") or {}).get("learning", {})
    if name not in learning:
        raise ConfigError(f"--params policy-{name}: checkpoint {str(path)!r} holds no parameters of policy {name!r}")
    return {**checkpoint, "model": learning[name]["model"]}


def _builtin_models() -> set[str]:
    """The networks fastrl's own algorithms build (PQN's Q-network): fastrl's code, named by path."""
    from fastrl.algos.registry import registered

    return {algorithm.model for algorithm in registered() if algorithm.model}


def code_named_by(config: Config) -> list[str]:
    """The config's values that name code to import and call: ``module:factory`` env ids and model names, and
    ``module:NAME`` plug-in algorithms."""
    named = []
    if ":" in config.env.id and not config.env.id.startswith("pettingzoo."):  # PettingZoo's own envs are not
        kwargs = f" with env.kwargs = {config.env.kwargs!r}" if config.env.kwargs else ""
        named.append(f"env.id = {config.env.id!r}{kwargs}")
    if ":" in config.model.name and config.model.name not in _builtin_models():
        kwargs = f" with model.kwargs = {config.model.kwargs!r}" if config.model.kwargs else ""
        named.append(f"model.name = {config.model.name!r}{kwargs}")
    if ":" in config.algo.name:  # a plug-in algorithm: imported wherever its registration is read
        named.append(f"algo.name = {config.algo.name!r}")
    return named
