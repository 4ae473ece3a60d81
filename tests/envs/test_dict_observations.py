"""Dict observations: the flatten order, the packed image + vector row, the multi model, the spaces
refused by name, determinism across process layouts, eval and load_policy (envs: tests/helpers/dict_envs.py)."""
import gymnasium as gym
import numpy as np
import pytest
import torch

import fastrl
from fastrl.config import ConfigError
from fastrl.envs.gym import EnvOutputError, GymEnv, UnsupportedEnvError
from fastrl.envs.obs_layout import ALIGN
from fastrl.evaluation import evaluate
from fastrl.models.microbatch import forward_microbatched
from fastrl.models.registry import build_model
from fastrl.runs.checkpoint import load_checkpoint
from tests.helpers import dict_envs
from tests.helpers.runs import cartpole

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

CARTPOLE = "tests.helpers.dict_envs:cartpole"
IMAGE_VECTOR = "tests.helpers.dict_envs:image_vector"
# the multi model with a small impala trunk (the 12x12 test image is too small for the Nature CNN)
SMALL_CNN = "model.name='multi'", "model.kwargs={cnn='impala', channels=[8]}"


def _train(tmp_path, name, *overrides, env=CARTPOLE, mode="sync"):
    config, base = cartpole(tmp_path, f"env.id='{env}'", *overrides, mode=mode)
    return fastrl.train(config, base, run_dir=tmp_path / name), tmp_path / name


def _identical(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("nested", [True, False])
def test_a_vector_dict_is_stored_in_gymnasium_flatten_order(nested):
    env = dict_envs.cartpole(nested)
    adapter = GymEnv("dict", dict_envs.cartpole(nested))
    assert adapter.obs_shape == (4,) and adapter.obs_dtype == np.float32 and not adapter.obs_layout.packed
    names = [part.name for part in adapter.obs_layout.parts]
    assert names == (["cart", "pole.angle", "pole.velocity"] if nested else ["cart", "pole_angle", "pole_velocity"])
    row = np.zeros((3, 4), np.float32)
    adapter.reset(7, row[0])
    obs, _ = env.reset(seed=7)
    for t in (1, 2):
        adapter.step(t % 2, row[t - 1], row[t])
    expected = [gym.spaces.flatten(env.observation_space, obs)]
    for t in (1, 2):
        expected.append(gym.spaces.flatten(env.observation_space, env.step(t % 2)[0]))
    assert np.array_equal(row, np.asarray(expected, np.float32))
    # the env declares velocity before angle; sorted keys give CartPole's own (x, x_dot, theta, theta_dot)
    assert np.array_equal(row[2], np.asarray(adapter.env.unwrapped.state, np.float32))


def test_the_packed_row_aligns_its_parts_and_round_trips_exactly():
    adapter = GymEnv("iv", dict_envs.image_vector(size=5))
    layout = adapter.obs_layout
    assert layout.packed and adapter.obs_dtype == np.uint8 and layout.channels_last
    assert [(p.name, p.dtype, p.shape) for p in layout.parts] == [
        ("noise", "float32", (3,)), ("screen", "uint8", (5, 5, 3)), ("sign", "float32", (1,))]
    assert all(p.offset % ALIGN == 0 for p in layout.parts) and layout.row_bytes % ALIGN == 0
    assert layout.row_bytes == 16 + 80 + 8  # 12 bytes padded to 16, 75 to 80, 4 to 8
    env = dict_envs.image_vector(size=5)
    row = np.zeros(layout.row_shape, np.uint8)
    obs, _ = env.reset(seed=3)
    adapter.reset(3, row)
    back = layout.unpack(row)
    assert np.array_equal(back["screen"], obs["screen"]) and back["screen"].dtype == np.uint8
    assert np.array_equal(back["sign"], obs["sign"])
    assert np.array_equal(back["noise"], obs["noise"].astype(np.float32))  # float64 is stored as float32
    assert np.array_equal(layout.pack(obs), row)
    # the model reads the same parts from the bytes: the image as [C, H, W], the vectors in flatten order
    model = build_model("multi", layout.row_shape, np.uint8, 2, obs_layout=layout, kwargs={"cnn": "impala"})
    rows = torch.from_numpy(np.stack([row, row]))
    assert torch.equal(model.image(rows)[1], torch.from_numpy(obs["screen"]).permute(2, 0, 1))
    assert torch.equal(model.vector(rows)[0], torch.from_numpy(np.concatenate([back["noise"], back["sign"]])))


def test_a_chw_image_is_read_as_it_is():
    layout = GymEnv("iv", dict_envs.image_vector(size=6, channels_last=False)).obs_layout
    assert not layout.channels_last and layout.image.shape == (3, 6, 6)
    obs, _ = dict_envs.image_vector(size=6, channels_last=False).reset(seed=0)
    model = build_model("auto", layout.row_shape, np.uint8, 2, obs_layout=layout, kwargs={"cnn": "impala"})
    assert torch.equal(model.image(torch.from_numpy(layout.pack(obs))[None])[0], torch.from_numpy(obs["screen"]))


@pytest.mark.parametrize("kind, key, what", [
    ("text", "extra", r"Text\("),
    ("multi_discrete", "extra", r"MultiDiscrete\(\[2 3\]\)"),
    ("second_image", "extra", r"a second uint8 image \(the first is 'image'\)"),
    ("bool_box", "extra", r"dtype bool"),
])
def test_a_part_fastrl_cannot_take_is_named(kind, key, what):
    with pytest.raises(UnsupportedEnvError, match=rf"env 'odd': observation part '{key}' .*{what}"):
        GymEnv("odd", dict_envs.with_space(kind))


def test_a_refused_part_stops_the_run_before_any_worker_starts(tmp_path):
    with pytest.raises(ConfigError, match=r"observation part 'extra' Text\(.*is not supported"):
        _train(tmp_path, "run", env="tests.helpers.dict_envs:with_space")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", ["discrete", "nested_discrete"])
def test_discrete_parts_are_taken_beside_an_image(kind):
    layout = GymEnv("odd", dict_envs.with_space(kind)).obs_layout
    assert layout.packed and layout.parts[-1].encoding == "one_hot"


def test_discrete_and_multibinary_parts_are_stored_as_gymnasium_flatten_does():
    env = dict_envs.discrete_parts()
    adapter = GymEnv("parts", dict_envs.discrete_parts())
    assert adapter.obs_shape == (2 + 4 + 3,) and not adapter.obs_layout.packed
    # flatten's order: the Dict's keys sorted (direction, flags, vec)
    assert [(p.name, p.encoding, p.shape) for p in adapter.obs_layout.parts] == [
        ("direction", "one_hot", (4,)), ("flags", "binary", (3,)), ("vec", "box", (2,))]
    rows = np.zeros((4, 9), np.float32)
    adapter.reset(5, rows[0])
    expected = [gym.spaces.flatten(env.observation_space, env.reset(seed=5)[0])]
    for t in (1, 2, 3):
        adapter.step(0, rows[t - 1], rows[t])
        expected.append(gym.spaces.flatten(env.observation_space, env.step(0)[0]))
    assert np.array_equal(rows, np.asarray(expected, np.float32))
    assert set(rows[:, :4].sum(1)) == {1.0}  # one-hot
    obs = env.step(0)[0]
    assert np.array_equal(adapter.obs_layout.pack(obs), gym.spaces.flatten(env.observation_space, obs))


def test_a_discrete_or_multibinary_value_out_of_its_space_is_named():
    row = np.zeros(9, np.float32)
    for bad, message in [({"direction": 5}, r"part 'direction': the value 5 is outside its Discrete's range 1..4"),
                         ({"direction": np.array([0.5])}, r"part 'direction' \(Discrete\) of shape \(1,\) and dtype "
                                                          r"float64; expected one integer"),
                         ({"flags": np.array([0, 2, 1], np.int8)}, r"part 'flags' \(MultiBinary\) holds a value")]:
        adapter = GymEnv("parts", dict_envs.discrete_parts(bad))
        with pytest.raises(EnvOutputError, match=message):
            adapter.reset(0, row)


def test_every_part_is_checked_on_every_step():
    adapter = GymEnv("iv", dict_envs.image_vector(size=4))
    row = np.zeros(adapter.obs_shape, np.uint8)
    good = adapter.obs_layout.unpack(adapter.obs_layout.pack(dict_envs.image_vector(size=4).reset(seed=0)[0]))
    bad = [({**good, "sign": np.array([np.nan], np.float32)}, r"non-finite value in observation part 'sign'"),
           ({**good, "noise": np.zeros(2)}, r"part 'noise' of shape \(2,\); the space declares \(3,\)"),
           ({**good, "screen": good["screen"].astype(np.float32)}, r"part 'screen' of dtype float32"),
           ({"sign": good["sign"], "noise": good["noise"]}, r"without the part 'screen'"),
           (np.zeros(3), r"type ndarray; the observation space is a Dict")]
    for obs, message in bad:
        with pytest.raises(EnvOutputError, match=message):
            adapter._write(obs, row)


def test_models_that_cannot_read_a_packed_row_say_so():
    layout = GymEnv("iv", dict_envs.image_vector(size=4)).obs_layout
    for name in ("mlp", "nature"):
        with pytest.raises(ValueError, match=r"packed uint8 row .* use model.name = 'multi'"):
            build_model(name, layout.row_shape, np.uint8, 2, obs_layout=layout)
    with pytest.raises(ValueError, match=r"model 'multi': it is for Dict observations holding a uint8 image"):
        build_model("multi", (4,), np.float32, 2)
    image_only = gym.spaces.Dict({"screen": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8)})
    from fastrl.envs.obs_layout import obs_layout_of

    only = obs_layout_of("img", image_only)
    build_model("multi", only.row_shape, np.uint8, 2, obs_layout=only, kwargs={"cnn": "impala"})  # no vector: fine
    with pytest.raises(ValueError, match=r"normalize_obs normalises the vector parts .* has none"):
        build_model("multi", only.row_shape, np.uint8, 2, obs_layout=only, kwargs={"cnn": "impala"},
                    normalize_obs=True)


def test_the_multi_model_is_batch_invariant_in_micro_batches():
    """Each row's output depends on that row only: a row forwarded among others equals it forwarded alone."""
    layout = GymEnv("iv", dict_envs.image_vector()).obs_layout
    torch.manual_seed(0)
    model = build_model("multi", layout.row_shape, np.uint8, 4, obs_layout=layout, kwargs={"cnn": "impala"},
                        normalize_obs=True, gaussian=True).eval()
    env = dict_envs.image_vector()
    rows = torch.from_numpy(np.stack([layout.pack(env.reset(seed=s)[0]) for s in range(21)]))
    with torch.no_grad():
        head, value = forward_microbatched(model, rows, 16)
        for i in (0, 7, 20):
            alone_head, alone_value = forward_microbatched(model, rows[i : i + 1], 16)
            assert torch.equal(alone_head[0], head[i]) and torch.equal(alone_value[0], value[i])


@pytest.mark.slow  # a learning run (7 s); Dict observations' bits are checked in the default run
def test_dict_cartpole_learns(tmp_path):
    summary, _ = _train(tmp_path, "learn", "engine.serial=true", "run.total_frames=30000", "engine.rollout=16",
                        "algo.name='ppo'", "algo.lr=0.001", "run.return_window=20", mode="hts")
    assert summary["final_return_mean"] > 60  # a random policy scores about 22; seeds 0-2 gave 89-123


SERIAL = ("serial", ("engine.serial=true",))
X1A1 = ("x1a1", ("engine.executors=1", "engine.actors=1"))
X2A2 = ("x2a2", ("engine.executors=2", "engine.actors=2", "engine.step_delay_s=0.001"))


@pytest.mark.parametrize("env, extra, layouts", [
    # the flat Dict: slow run
    pytest.param(CARTPOLE, ("model.normalize_obs=true",), (SERIAL, X1A1, X2A2), marks=pytest.mark.slow),
    (IMAGE_VECTOR, (*SMALL_CNN, "model.normalize_obs=true"), (SERIAL, X2A2)),  # the multi model in micro-batches
])
def test_dict_runs_do_not_depend_on_process_layout(tmp_path, env, extra, layouts):
    """engine.serial against processes, 1/1 against 2/2 executors/actors (random step delays): bit-identical
    parameters and observation statistics."""
    results = []
    for name, layout in layouts:
        _, run = _train(tmp_path, name, *layout, *extra, env=env, mode="hts")
        results.append(load_checkpoint(run)["model"])
    assert "obs_normalizer.mean" in results[0] and bool(results[0]["obs_normalizer.mean"].abs().sum() > 0)
    for other in results[1:]:
        assert _identical(results[0], other)


@pytest.mark.slow  # learns to a score
def test_the_image_vector_env_trains_with_the_multi_model(tmp_path):
    """Either part alone gives 0.5 a step; a policy that reads both gets more within a few thousand frames."""
    summary, run = _train(tmp_path, "iv", "engine.serial=true", *SMALL_CNN, "algo.name='ppo'", "engine.rollout=16",
                          "run.total_frames=6144", "run.return_window=200", env=IMAGE_VECTOR)
    checkpoint = load_checkpoint(run)["model"]
    assert any(key.startswith("image_trunk.") for key in checkpoint)
    assert all(bool(torch.isfinite(value).all()) for value in checkpoint.values())
    # chance is 0.5 (sd of a 200-episode mean 0.035); seeds 0-1 gave 0.73-0.77
    assert summary["final_return_mean"] > 0.62


def test_eval_and_load_policy_play_dict_runs(tmp_path):
    _, flat = _train(tmp_path, "flat", "engine.serial=true")
    trusted = {"trust_code": True}  # module:factory envs
    assert evaluate(flat, episodes=2, seed=1, **trusted) == evaluate(flat, episodes=2, seed=1, **trusted)
    _, packed = _train(tmp_path, "packed", "engine.serial=true", *SMALL_CNN, "engine.rollout=16", env=IMAGE_VECTOR)
    played = evaluate(packed, episodes=4, seed=1, greedy=True, **trusted)
    assert played["lengths"] == [1, 1, 1, 1] and set(played["returns"]) <= {0.0, 1.0}
    policy = fastrl.load_policy(packed, **trusted)
    obs, _ = dict_envs.image_vector().reset(seed=0)
    with torch.no_grad():
        logits, value = policy(torch.from_numpy(policy.obs_layout.pack(obs))[None])
    assert logits.shape == (1, 2) and value.shape == (1,)


def test_auto_gives_a_small_image_beside_vectors_the_impala_trunk():
    from fastrl.models.cnn import ImpalaResNet

    layout = GymEnv("iv", dict_envs.image_vector(size=12)).obs_layout
    model = build_model("auto", layout.row_shape, np.uint8, 2, obs_layout=layout)
    assert any(isinstance(m, torch.nn.MaxPool2d) for m in model.image_trunk.modules())  # the ResNet's pools
    assert not isinstance(model, ImpalaResNet)  # a multi model: the trunk only


# ---------------------------------------------------------------- the spaces a first env has: Discrete, Tuple


@pytest.mark.parametrize("env_id, kwargs", [("FrozenLake-v1", {}), ("Taxi-v4", {}), ("CliffWalking-v1", {}),
                                            ("Blackjack-v1", {})])
def test_toy_text_observations_are_stored_as_gymnasium_flatten_does(env_id, kwargs):
    """Discrete (FrozenLake, Taxi, CliffWalking) and Tuple-of-Discretes (Blackjack) observations, refused before,
    become one float32 row: exactly gymnasium.spaces.flatten's (one-hot columns), on reset and on every step."""
    env = GymEnv(env_id, gym.make(env_id, **kwargs))
    reference = gym.make(env_id, **kwargs)
    space = reference.observation_space
    row, after = np.zeros(env.obs_shape, env.obs_dtype), np.zeros(env.obs_shape, env.obs_dtype)
    env.reset(5, row)
    obs, _ = reference.reset(seed=5)
    np.testing.assert_array_equal(row, gym.spaces.flatten(space, obs).astype(np.float32))
    for step in range(20):
        action = step % env.n_actions
        _, _, _, over = env.step(action, row, after)
        obs, _, terminated, truncated, _ = reference.step(action)
        np.testing.assert_array_equal(after, gym.spaces.flatten(space, obs).astype(np.float32))
        if over:
            assert terminated or truncated
            env.reset(step, row)
            obs, _ = reference.reset(seed=step)
        else:
            row, after = after, row
    env.close()


def test_tuples_and_dicts_nest_in_either_order():
    inner = gym.spaces.Dict({"b": gym.spaces.Discrete(3), "a": gym.spaces.Box(-1, 1, (2,), np.float32)})
    space = gym.spaces.Tuple((gym.spaces.MultiBinary(2), inner, gym.spaces.Tuple((gym.spaces.Discrete(2, start=1),))))
    env = GymEnv("nested", dict_envs.with_observation_space(space))
    value = space.sample()
    np.testing.assert_array_equal(env.obs_layout.pack(value), gym.spaces.flatten(space, value).astype(np.float32))
    assert [part.name for part in env.obs_layout.parts] == ["0", "1.a", "1.b", "2.0"]  # a Dict sorts its keys


def test_a_tuple_observation_that_is_not_a_tuple_is_named():
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(2)))
    env = GymEnv("odd", dict_envs.with_observation_space(space, returns={"0": 1}))
    with pytest.raises(EnvOutputError, match="an observation of type dict; the observation space is a Tuple"):
        env.reset(0, np.zeros(env.obs_shape, env.obs_dtype))


def test_a_discrete_observation_learns(tmp_path):
    """FrozenLake without slipping: one-hot states, PPO walks to the goal on every episode within seconds."""
    config, base = cartpole(tmp_path, "env.id='FrozenLake-v1'", "env.kwargs={is_slippery=false}", "algo.name='ppo'",
                            "algo.lr=1e-3", "algo.entropy_coef=0.01", "engine.rollout=32", "run.return_window=20",
                            "run.target_return=1.0", "run.total_frames=100000")
    summary = fastrl.train(config, base, run_dir=tmp_path / "run")
    assert summary["frames"] < 100000  # stopped by the target: a mean of 1.0 over 20 episodes
    assert summary["final_return_mean"] >= 0.9  # (the rollout in flight when it stopped may add a miss)
