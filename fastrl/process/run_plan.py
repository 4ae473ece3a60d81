"""The run's plan, made once in the main process before anything starts: the config checked against the env, the
model and every layer (``fastrl.layers``), the "auto" process layout and compiling resolved, and every
buffer sized (refused if ``/dev/shm`` cannot hold it). Every worker gets the same numbers from it.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from fastrl.buffers import BufferPlan
from fastrl.buffers.arena import ShmSpaceError, check_space
from fastrl.buffers.slots import SlotShape
from fastrl.config import Config, ConfigError
from fastrl.envs.registry import EnvInfo, probe_env
from fastrl.layer import layer_stats, plan_layers
from fastrl.modes import mode_of
from fastrl.process.machine_limits import check_address_space, check_cgroup_memory
from fastrl.spec import WorkerIds
from fastrl.telemetry.sinks import check_sinks


@dataclass(frozen=True)
class RunPlan:
    buffers: BufferPlan
    env_info: EnvInfo
    config: Config  # "auto" layout keys resolved: what the run uses and its config.toml records


def plan_run(config: Config, resuming: bool = False) -> RunPlan:
    """Validate the env and the model, choose the "auto" process layout and compiling, size every buffer,
    before anything is started.

    Problems with the user's env or model are ``ConfigError``s: bad input, not a crash.
    """
    import torch

    from fastrl.algos.registry import load_algorithm
    from fastrl.buffers.params import count_parameters
    from fastrl.config import validate
    from fastrl.devices import resolve_devices
    from fastrl.models.compiling import resolve_compile
    from fastrl.models.policy import build_copy
    from fastrl.process.auto_layout import resolve_layout

    config = resolve_devices(config)  # "auto" devices placed, a GPU asked for where there is none refused
    algorithm = load_algorithm(config.algo.name)  # a plug-in's module imported and its registration checked ...
    validate(config)  # ... and the config checked against it, as a built-in's is when the config is read
    try:
        info = probe_env(config.env, config.engine.mode)  # and its backend checked against the mode
        policy = build_copy(info, config)  # a probe: its shapes and parameter count, not its weights
        n_params = count_parameters(policy)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    except Exception as exc:  # the user's env or model code failed at start
        raise ConfigError(
            f"env {config.env.id!r} / model {config.model.name!r} failed at start: "
            f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        ) from None
    if config.engine.reset_ahead is True and not info.resets_from_seed:
        raise ConfigError(
            f"engine.reset_ahead = true: env {config.env.id!r}'s adapter does not declare resets_from_seed (a spare "
            "instance may start an episode only where the reset seed alone fixes it); set it to 'auto' or false"
        )
    image_model = hasattr(policy, "set_precision")  # a built-in CNN: threads and compiling pay for it
    # any convolution makes the learner's step worth splitting over threads (Connect Four's board model: 1.26x the
    # rows on two cores with 2 threads), though only the built-in CNNs are measured compiled
    convolves = image_model or any(isinstance(m, torch.nn.Conv2d) for m in policy.modules())
    # once, here: every process gets the same numbers
    config = resolve_layout(config, image_model=image_model, agents=info.agents, split_learner=convolves)
    config = resolve_compile(config, torch.device(config.engine.device), image_model)  # and the same graphs
    config, needs = plan_layers(config, info, policy, resuming)  # each layer's checks, and the memory it needs
    engine = config.engine
    check_sinks(config)  # a missing tensorboardX or wandb is bad input, not a crash once training runs
    mode = mode_of(config)
    slots = mode.slot_count(engine.envs, config.algo.batch_slots)
    action = info.action
    assert action is not None  # EnvInfo.__post_init__ fills it in (Discrete) where the env gave none
    shape = SlotShape(
        slots,
        engine.rollout,
        info.obs_shape,
        info.obs_dtype,
        action.slot_shape,
        action.slot_dtype,
        hidden_size=2 * config.model.lstm,
        live=info.agents > 1,
    )
    plan = BufferPlan(
        shape,
        n_params,
        engine.learners,
        WorkerIds.of(config).total,
        mode.weight_slots,
        player_slots=needs.player_slots,
        layer_arrays=needs.arrays,
        layer_stats=layer_stats(),
        metrics=tuple(algorithm.metrics),  # the figures its rule reports beside the losses: a column each
    )
    nbytes = plan.layout().nbytes
    try:
        check_space(nbytes)
    except ShmSpaceError as exc:
        raise ConfigError(str(exc)) from None
    check_address_space(nbytes)
    check_cgroup_memory(nbytes, processes=WorkerIds.of(config).total + 2)  # + the main process and fork server
    return RunPlan(plan, info, config)
