"""``fastrl train --resume RUN_DIR``: read the run's checkpoint and its config, check they can go on.

The config is the checkpoint's own (the one it was trained with), not ``config.toml``: that file is
rewritten on every resume and is there for people; one that disagrees with the checkpoint about what
the run is, or cannot be read, is refused.

Resuming continues the run in the same directory: frame counter, optimizer, schedules and
policy version go on from the checkpoint, ``metrics.jsonl`` is appended. Checkpoints taken at
a barrier carry every env's state, so the run continues bit for bit; the others (the main
process's from the shared weights, or an env that cannot be pickled) restart envs with seeded
resets. Overrides may change how the run executes (run.*, reliability.*, the process layout,
algorithm hyper-parameters), not what it is (env, model, mode, envs, rollout, optimizer).
"""

from __future__ import annotations

import copy
import logging
import pickletools
from dataclasses import dataclass
from pathlib import Path

from fastrl.config import Config, ConfigError, apply_overrides, config_from_dict, load_config
from fastrl.modes import mode_of
from fastrl.runs.checkpoint import CheckpointStore, checkpoint_file, env_state_files, load_checkpoint
from fastrl.runs.run_dir import RunDir
from fastrl.spec import ResumePoint

log = logging.getLogger(__name__)

FIXED_KEYS = (
    "env.id",
    "env.kwargs",
    "env.atari",
    "engine.mode",
    "engine.envs",
    "engine.rollout",
    "model.name",
    "model.hidden",
    "model.kwargs",
    "model.lstm",  # these three change the parameters the checkpoint holds: refused now, not when loading them
    "model.normalize_obs",
    "algo.normalize_returns",
    "algo.name",
    "algo.optimizer",
)


@dataclass(frozen=True)
class Resume:
    config: Config
    run_dir: Path
    point: ResumePoint

    def set_aside_newer(self) -> None:
        """Checkpoints newer than the one resumed from belong to an abandoned future: move them aside."""
        CheckpointStore(self.run_dir / "checkpoints").set_aside_after(self.point.rollout)


def prepare_resume(target: str | Path, overrides: list[str] | tuple[str, ...] = (), ranks: int = 1) -> Resume:
    """``ranks``: the torchrun ranks resuming it (each from its own directory); the run's own count, or refused."""
    path = checkpoint_file(target)
    if not path.is_file():
        raise ConfigError(f"nothing to resume at {str(target)!r}: no checkpoint {str(path)!r}")
    run_dir = path.parent.parent
    made_with = RunDir(run_dir).ranks()
    if made_with != ranks:
        raise ConfigError(
            f"cannot resume {str(run_dir)!r} with {ranks} rank(s): it was made with {made_with} "
            f"(every rank resumes its own envs), so launch it with torchrun --nproc-per-node/--nnodes "
            f"giving {made_with} rank(s)" + (" or without torchrun" if made_with == 1 else "")
        )
    checkpoint = load_checkpoint(path)  # tensors and plain data only, or a ConfigError naming the file
    saved, config = _configs(path, checkpoint, made_with, overrides)
    _check_config_toml(run_dir, saved)
    if mode_of(saved).independent:
        raise ConfigError(
            f"cannot resume {str(run_dir)!r}: resuming an engine.mode = {saved.engine.mode!r} run is not supported "
            "(its learners stop at different rollouts, so there is no one barrier to go on from); each learner's last "
            "parameters are in checkpoints/learner-<i>/latest.pt and what its mode made of them in "
            "checkpoints/latest.pt"
        )
    _check_unchanged(saved, config)
    state = checkpoint.get("resume")
    if not isinstance(state, dict) or "model" not in state:
        raise ConfigError(f"checkpoint {str(path)!r} holds no resumable state (written by an older fastrl?)")
    if state["frames"] >= config.run.total_frames:
        raise ConfigError(
            f"the run already reached {state['frames']} frames (run.total_frames = {config.run.total_frames}); "
            f"to train longer, raise it: --set run.total_frames={2 * config.run.total_frames}"
        )
    env_states = _env_states(path, checkpoint)
    # what a resumed run rewrites or appends to
    for name in ("config.toml", "metrics.jsonl", "summary.json", "checkpoints/.reserve"):
        if (run_dir / name).is_symlink() or ((run_dir / name).exists() and not (run_dir / name).is_file()):
            raise ConfigError(f"cannot resume {str(run_dir)!r}: its {name} is not a plain file; move it aside first")
    log.info(
        "resuming %s at rollout %d (%d frames), %s",
        run_dir,
        state["rollout"],
        state["frames"],
        "exactly: env states saved at the barrier" if env_states else "envs restart with seeded resets",
    )
    return Resume(config, run_dir, ResumePoint(str(path), int(state["rollout"]), env_states))


def _configs(path: Path, checkpoint: dict, ranks: int, overrides) -> tuple[Config, Config]:
    """The run's config as its checkpoint holds it (the one it was trained with), and with ``overrides``.
    Under torchrun a rank's checkpoint holds its own share of the envs: the run's is ``ranks`` times that."""
    data = checkpoint.get("config")
    if not isinstance(data, dict) or not isinstance(data.get("engine"), dict):
        raise ConfigError(f"checkpoint {str(path)!r} holds no config (not a fastrl checkpoint?)")
    if ranks > 1:
        data = {**data, "engine": {**data["engine"], "envs": data["engine"]["envs"] * ranks}}
    try:
        saved = config_from_dict(copy.deepcopy(data))
    except ConfigError as exc:
        raise ConfigError(f"checkpoint {str(path)!r}: its config cannot be used here: {exc}") from None
    return saved, config_from_dict(apply_overrides(copy.deepcopy(data), overrides))


def _check_config_toml(run_dir: Path, saved: Config) -> None:
    """``config.toml`` is for people; the checkpoint's config is the run's. A file that says otherwise about what
    the run is (changed by hand, or torn by a full disk under an older fastrl: empty TOML is all defaults) is
    refused rather than trusted, or silently overwritten."""
    path = run_dir / "config.toml"
    if not path.is_file():
        return  # written again from the checkpoint's
    try:
        on_disk = load_config(path)
    except ConfigError as exc:
        differs = f"it cannot be read ({exc})"
    else:
        changed = [key for key in FIXED_KEYS if _value(on_disk, key) != _value(saved, key)]
        if not changed:
            return
        key = changed[0]
        differs = f"it says {key} = {_value(on_disk, key)!r}, the checkpoint {_value(saved, key)!r}"
    raise ConfigError(
        f"cannot resume {str(run_dir)!r}: its config.toml disagrees with the config its checkpoint was trained "
        f"with: {differs}. The checkpoint's is the run's: delete config.toml (it is written again from the "
        "checkpoint's), or put back the one the run was made with"
    )


def _value(config: Config, key: str):
    section, name = key.split(".")
    return getattr(getattr(config, section), name)


def _check_unchanged(saved: Config, config: Config) -> None:
    for key in FIXED_KEYS:
        section, name = key.split(".")
        before, after = getattr(getattr(saved, section), name), getattr(getattr(config, section), name)
        if before != after:
            raise ConfigError(
                f"cannot resume with {key} = {after!r}: the run was made with {before!r} "
                "(on resume only run.*, reliability.*, the process layout and algorithm hyper-parameters may change)"
            )


def _env_states(path: Path, checkpoint: dict) -> str | None:
    name = checkpoint.get("env_states")
    if not name:
        return None
    folder = path.parent / name
    if not folder.is_dir():
        log.warning("the env states %s of %s are gone: envs restart with seeded resets", folder, path)
        return None
    for file in env_state_files(folder):  # this user's own files, or refused before anything starts
        try:  # whole pickles: walked opcode by opcode, nothing in them run, so a cut or torn file is refused here
            with open(file, "rb") as f:
                for _ in pickletools.genops(f):
                    pass
        except (OSError, ValueError, EOFError) as exc:
            raise ConfigError(
                f"the env states {str(file)!r} cannot be read ({exc}); delete {str(folder)!r} to resume from the "
                "checkpoint with seeded resets"
            ) from None
    return str(folder)
