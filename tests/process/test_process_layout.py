"""engine.executors / actors / inline_actors / learner_threads = "auto": the layout chosen for the cores and GPU
present."""
import pytest

import fastrl
import fastrl.process.auto_layout as process_layout
from fastrl.config import ConfigError, load_config, shipped_configs, tomllib  # tomli on Python 3.10
from fastrl.devices import resolve_devices, resolved_engine
from fastrl.envs.atari import is_atari_id
from fastrl.process.auto_layout import (
    Layout,
    Machine,
    choose_layout,
    choose_learner_threads,
    choose_micro_batch,
    resolve_layout,
)
from fastrl.process.run_plan import plan_run
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def _engine(*overrides: str, cuda: bool = False):
    """The default job's engine with ``overrides``, its devices placed on a machine with a GPU (``cuda``) or without."""
    return resolved_engine(load_config(None, list(overrides)).engine, cuda)


@pytest.mark.parametrize("cores, expected", [
    (1, Layout(1, 1, True)),
    (2, Layout(2, 2, True)),  # the measured best on 2 cores: one executor per core, inline actors
    (16, Layout(8, 8, True)),  # 15 cores left by the learner: 8 executors of 2 envs step as fast as 15
    (64, Layout(16, 16, True)),  # never more executors than envs
])
def test_cpu_only_one_inline_executor_per_core(cores, expected):
    assert choose_layout(_engine(), Machine(cores, cuda=False)) == expected
    # a GPU the config does not use changes nothing
    assert choose_layout(_engine("engine.device='cpu'", cuda=True), Machine(cores, cuda=True)) == expected


@pytest.mark.parametrize("cores, expected", [
    (1, Layout(1, 1, False)),
    (2, Layout(1, 1, False)),  # the actor process and the learner drive the GPU from the other core
    (16, Layout(8, 2, False)),  # 2 actor processes from 16 cores; 13 cores left, 8 executors of 2 envs
    (64, Layout(16, 2, False)),
])
def test_with_cuda_actor_processes_on_the_gpu_and_executors_on_the_rest(cores, expected):
    assert choose_layout(_engine("engine.device='auto'", cuda=True), Machine(cores, cuda=True)) == expected
    assert choose_layout(_engine("engine.device='cuda'", cuda=True), Machine(cores, cuda=True)) == expected


@pytest.mark.parametrize("cores, expected", [
    (2, Layout(2, 2, True)),
    (16, Layout(8, 8, True)),  # the learner drives the GPU from a core of its own: 15 left, 2 envs each
    (64, Layout(16, 16, True)),
])
def test_actors_on_the_cpu_with_a_gpu_learner_run_inline(cores, expected):
    engine = _engine("engine.actor_device='cpu'", cuda=True)
    assert choose_layout(engine, Machine(cores, cuda=True)) == expected
    assert choose_learner_threads(engine, Machine(cores, cuda=True)) == 1  # the GPU computes: one thread feeds it


def test_many_envs_on_many_cores_are_capped():
    assert choose_layout(_engine("engine.envs=256"), Machine(64, cuda=False)) == Layout(32, 32, True)
    gpu = _engine("engine.envs=256", "engine.device='auto'", cuda=True)
    assert choose_layout(gpu, Machine(64, cuda=True)) == Layout(32, 2, False)


def test_learners_keep_cores_on_a_big_machine_only():
    gala = ("engine.mode='gala'", "engine.learners=4")
    assert choose_layout(_engine(*gala), Machine(16, cuda=False)) == Layout(8, 8, True)  # 12 cores: 2 envs each
    assert choose_layout(_engine(*gala), Machine(2, cuda=False)) == Layout(2, 2, True)  # shared, as measured
    assert choose_layout(_engine("engine.learner_threads=8"), Machine(16, cuda=False)) == Layout(8, 8, True)
    assert choose_layout(_engine("engine.learner_threads=12"), Machine(16, cuda=False)) == Layout(4, 4, True)


@pytest.mark.parametrize("cores, cuda, overrides, expected", [
    (1, False, (), 1),
    (2, False, (), 2),  # measured: 2 threads ran the Pong PPO job 1.8x faster than 1, sharing the executors' cores
    (4, False, (), 4),
    (2, False, ("engine.mode='gala'", "engine.learners=4"), 1),  # the cores shared among the learners
    (8, False, (), 2),  # above 4 cores: a quarter of them, 2 to 8
    (16, False, (), 4),
    (64, False, (), 8),
    (16, False, ("engine.mode='gala'", "engine.learners=4"), 2),
    (16, True, ("engine.device='auto'",), 1),  # the GPU computes
    (2, False, ("engine.learner_threads=3",), 3),  # given: kept
])
def test_learner_threads(cores, cuda, overrides, expected):
    assert choose_learner_threads(_engine(*overrides, cuda=cuda), Machine(cores, cuda)) == expected


def test_learner_threads_of_a_small_model_stay_one():
    """An MLP's step is too small to split (2 threads ran Hopper 5x slower); a given number is still kept."""
    assert choose_learner_threads(_engine(), Machine(2, False), image_model=False) == 1
    assert choose_learner_threads(_engine(), Machine(64, False), image_model=False) == 1
    assert choose_learner_threads(_engine("engine.learner_threads=2"), Machine(2, False), image_model=False) == 2


@pytest.mark.parametrize("cuda, overrides, image_model, expected", [
    (False, (), True, 8),  # the CNNs' size on every CPU measured
    (False, (), False, 16),  # the MLP's
    (True, ("engine.device='cpu'",), True, 8),  # a GPU the run does not use
    (True, ("engine.actor_device='cpu'",), True, 8),  # actors on the CPU beside a GPU learner
    (True, (), True, 16),  # on a GPU: every env of the learner in one forward
    (True, ("engine.envs=20",), True, 24),  # ... rounded up to a multiple of 8
    (True, ("engine.envs=64", "engine.actors=4"), True, 64),  # whatever the actor count: a layout changes no bits
    (True, ("engine.envs=4096",), False, 1024),
    (True, ("engine.mode='gala'", "engine.learners=2", "engine.envs=32"), True, 16),  # a learner's envs
    (True, ("engine.micro_batch=32",), True, 32),  # given: kept
])
def test_the_micro_batch_follows_the_actors_device_and_the_model_never_the_layout(cuda, overrides, image_model,
                                                                                  expected):
    assert choose_micro_batch(_engine(*overrides, cuda=cuda), Machine(16, cuda), image_model) == expected


@pytest.mark.parametrize("name", shipped_configs())
def test_every_shipped_config_keeps_the_cpu_micro_batch_it_was_measured_with(name):
    """Before "auto" the Atari configs said 8 and the others took the schema's 16: on a CPU "auto" must give
    the same, or their measured results would no longer be the configs' own."""
    config = load_config(name)
    atari = is_atari_id(config.env.id)
    resolved = resolve_layout(resolve_devices(config, cuda=False), Machine(2, cuda=False), image_model=atari)
    if config.engine.micro_batch == "auto":
        assert resolved.engine.micro_batch == (8 if atari else 16), name
    on_gpu = resolve_layout(resolve_devices(config, cuda=True), Machine(16, cuda=True), image_model=atari).engine
    assert on_gpu.device == "cuda", name
    assert on_gpu.actor_device == ("cpu" if config.engine.inline_actors is True else "cuda"), name


@pytest.mark.parametrize("overrides, expected", [
    (("engine.executors=4",), Layout(4, 4, True)),
    (("engine.actors=1",), Layout(2, 1, False)),  # an explicit actor count asks for actor processes
    (("engine.inline_actors=false",), Layout(2, 1, False)),
    (("engine.inline_actors=true", "engine.actors=3"), Layout(3, 3, True)),  # executors follow the actors
    (("engine.executors=1", "engine.actors=1", "engine.inline_actors=false"), Layout(1, 1, False)),
    (("engine.serial=true",), Layout(1, 1, False)),
])
def test_explicit_keys_are_kept_and_the_auto_ones_fit_them(overrides, expected):
    assert choose_layout(_engine(*overrides), Machine(2, cuda=False)) == expected


def test_resolve_writes_the_numbers_and_checks_them_again(monkeypatch):
    with pytest.raises(ValueError, match="the devices are placed first"):  # where the actors compute decides
        resolve_layout(load_config(None, ["engine.envs=6"]), Machine(64, cuda=False))
    config = resolve_devices(load_config(None, ["engine.envs=6"]), cuda=False)
    resolved = resolve_layout(config, Machine(64, cuda=False))
    assert (resolved.engine.executors, resolved.engine.actors, resolved.engine.inline_actors) == (6, 6, True)
    assert resolved.engine.learner_threads == 8
    assert config.engine.executors == "auto"  # the caller's config is left as it was
    assert resolve_layout(resolved) is resolved  # nothing left to choose
    # the cross-key checks of validate() run on the chosen numbers
    monkeypatch.setattr(process_layout, "choose_layout", lambda engine, machine, agents=1: Layout(7, 1, False))
    with pytest.raises(ConfigError, match="engine.executors = 7 is more than engine.envs = 6"):
        resolve_layout(config, Machine(64, cuda=False))


def test_machine_counts_the_cpus_this_process_may_use(monkeypatch):
    import torch

    monkeypatch.setattr(process_layout.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert Machine.detect() == Machine(3, True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert Machine.detect() == Machine(3, False)


@pytest.mark.parametrize("value, message", [
    ("engine.executors='many'", r"engine.executors = 'many': allowed values are an int >= 1 or 'auto'"),
    ("engine.actors=0", r"engine.actors = 0: must be >= 1"),
    ("engine.actors=1.5", r"engine.actors = 1.5: allowed values are an int >= 1 or 'auto'"),
    ("engine.inline_actors='yes'", r"engine.inline_actors = 'yes': allowed values are true, false or 'auto'"),
    ("engine.inline_actors=1", r"engine.inline_actors = 1: allowed values are true, false or 'auto'"),
    ("engine.learner_threads='all'", r"engine.learner_threads = 'all': allowed values are an int >= 1 or 'auto'"),
])
def test_only_auto_or_a_valid_value(value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [value])


def test_plan_run_resolves_once_and_the_run_dir_records_the_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(Machine, "detect", classmethod(lambda cls: Machine(2, cuda=False)))
    _, overrides = cartpole(tmp_path, "engine.executors='auto'", "engine.actors='auto'",
                            "engine.inline_actors='auto'", "run.total_frames=400")
    plan = plan_run(load_config(None, overrides))
    assert (plan.config.engine.executors, plan.config.engine.actors, plan.config.engine.inline_actors) == (2, 2, True)
    summary = fastrl.train({}, overrides, run_dir=tmp_path / "run")
    assert summary["status"] == "complete"
    saved = tomllib.loads((tmp_path / "run" / "config.toml").read_text())["engine"]
    assert (saved["executors"], saved["actors"], saved["inline_actors"], saved["learner_threads"]) == (2, 2, True, 1)
    # where it ran: the default "auto" devices, placed on this machine (no GPU)
    assert (saved["device"], saved["actor_device"], saved["micro_batch"]) == ("cpu", "cpu", 16)
