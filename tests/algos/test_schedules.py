"""The learning rate and the entropy bonus follow the frames learned (``fastrl.algos.schedules``)."""

import pytest

from fastrl.algos import schedules
from fastrl.algos.ppo_options import PPOOptions
from fastrl.config import AlgoConfig, ConfigError, load_config

pytestmark = pytest.mark.unit


def test_a_constant_entropy_bonus_never_moves():
    algo = AlgoConfig(entropy_coef=0.02, entropy_final=0.5, entropy_anneal_frames=100)
    assert [schedules.entropy_coef(algo, f, 1000) for f in (0, 50, 10_000)] == [0.02, 0.02, 0.02]


def test_a_linear_entropy_bonus_reaches_its_final_value_and_stays():
    algo = AlgoConfig(entropy_schedule="linear", entropy_coef=0.01, entropy_final=0.001, entropy_anneal_frames=1000)
    values = [schedules.entropy_coef(algo, f, 10**7) for f in (0, 250, 500, 1000, 5000)]
    assert values == pytest.approx([0.01, 0.00775, 0.0055, 0.001, 0.001])


def test_the_entropy_anneal_defaults_to_the_runs_frames_and_is_split_between_learners():
    algo = AlgoConfig(entropy_schedule="linear", entropy_coef=0.01, entropy_final=0.0)
    assert schedules.entropy_coef(algo, 500, 1000) == pytest.approx(0.005)
    # four learners (gala) each learn a quarter of the frames: halfway through theirs at 125
    assert schedules.entropy_coef(algo, 125, 1000, share=4) == pytest.approx(0.005)


def test_the_learning_rate_anneals_to_zero_over_the_runs_frames():
    algo = AlgoConfig(lr=1e-3, lr_schedule="linear")
    assert [schedules.learning_rate(algo, f, 1000) for f in (0, 500, 1000, 2000)] == pytest.approx([1e-3, 5e-4, 0, 0])
    assert schedules.learning_rate(AlgoConfig(lr=1e-3, lr_schedule="constant"), 900, 1000) == 1e-3


def test_a_linear_learning_rate_with_a_horizon_of_its_own_ends_at_lr_final_and_holds():
    algo = AlgoConfig(lr=5e-4, lr_schedule="linear", lr_final=1e-4, lr_anneal_frames=1000)
    values = [schedules.learning_rate(algo, f, 10**7) for f in (0, 500, 1000, 10**6)]
    assert values == pytest.approx([5e-4, 3e-4, 1e-4, 1e-4])
    # each of two learners runs it over its share of the frames
    assert schedules.learning_rate(algo, 250, 10**7, share=2) == pytest.approx(3e-4)


def test_a_late_anneal_holds_the_learning_rate_until_its_start():
    algo = AlgoConfig(lr=5e-4, lr_schedule="linear", lr_final=1e-4, lr_anneal_start=800, lr_anneal_frames=400)
    values = [schedules.learning_rate(algo, f, 10**7) for f in (0, 800, 1000, 1200, 5000)]
    assert values == pytest.approx([5e-4, 5e-4, 3e-4, 1e-4, 1e-4])
    assert schedules.learning_rate(algo, 500, 10**7, share=2) == pytest.approx(3e-4)  # each learner: its share
    # without a horizon of its own, the anneal takes the rest of the run
    rest = AlgoConfig(lr=1e-3, lr_schedule="linear", lr_anneal_start=600)
    assert [schedules.learning_rate(rest, f, 1000) for f in (300, 800, 1000)] == pytest.approx([1e-3, 5e-4, 0])


def test_a_late_entropy_anneal_keeps_the_constant_bonus_bits_until_its_start():
    plain = AlgoConfig(entropy_coef=0.01)
    late = AlgoConfig(
        entropy_coef=0.01, entropy_schedule="linear", entropy_final=0.0, entropy_anneal_start=1000,
        entropy_anneal_frames=500,
    )
    for frames in (0, 1, 333, 999, 1000):  # the same floats, not approximately: runs that end before it keep their bits
        assert schedules.entropy_coef(late, frames, 10_000) == schedules.entropy_coef(plain, frames, 10_000)
    values = [schedules.entropy_coef(late, f, 10_000) for f in (1250, 1500, 9000)]
    assert values == pytest.approx([0.005, 0.0, 0.0])
    assert schedules.entropy_coef(late, 625, 10_000, share=2) == pytest.approx(0.005)  # each learner: its share
    rest = AlgoConfig(entropy_coef=0.01, entropy_schedule="linear", entropy_anneal_start=600)  # the rest of the run
    assert [schedules.entropy_coef(rest, f, 1000) for f in (300, 800, 1000)] == pytest.approx([0.01, 0.005, 0.0])


def test_a_late_cooldown_leaves_every_rate_before_it_bit_identical_then_scales_it_down():
    plain = AlgoConfig(lr=5e-4, lr_schedule="linear")
    cooled = AlgoConfig(
        lr=5e-4, lr_schedule="linear", lr_cooldown_start=1000, lr_cooldown_frames=500, lr_cooldown_factor=0.2
    )
    # before its start the rates are the same floats, not approximately: runs that end before it keep their bits
    for frames in (0, 1, 333, 999):
        assert schedules.learning_rate(cooled, frames, 10_000) == schedules.learning_rate(plain, frames, 10_000)
    scaled = [
        schedules.learning_rate(cooled, f, 10_000) / schedules.learning_rate(plain, f, 10_000)
        for f in (1000, 1250, 1500, 4000)
    ]
    assert scaled == pytest.approx([1.0, 0.6, 0.2, 0.2])
    # each of two learners: its share of the frames
    assert schedules.learning_rate(cooled, 625, 10_000, share=2) == pytest.approx(
        0.6 * schedules.learning_rate(plain, 625, 10_000, share=2)
    )
    # on a constant rate too
    constant = AlgoConfig(
        lr=1e-3, lr_schedule="constant", lr_cooldown_start=10, lr_cooldown_frames=10, lr_cooldown_factor=0.5
    )
    assert [schedules.learning_rate(constant, f, 100) for f in (5, 15, 50)] == pytest.approx([1e-3, 7.5e-4, 5e-4])


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("algo.entropy_schedule='cosine'", "algo.entropy_schedule"),
        ("algo.entropy_final=-0.1", "algo.entropy_final"),
        ("algo.entropy_anneal_frames=-5", "algo.entropy_anneal_frames"),
        ("algo.lr_final=-1e-4", "algo.lr_final"),
        ("algo.lr_anneal_frames=-5", "algo.lr_anneal_frames"),
        ("algo.lr_anneal_start=-1", "algo.lr_anneal_start"),
        ("algo.lr_cooldown_factor=1.5", "algo.lr_cooldown_factor"),
        ("algo.lr_cooldown_frames=0", "algo.lr_cooldown_frames"),
        ("algo.options.clip_schedule='step'", "algo.options.clip_schedule"),
        ("algo.options.clip_final=0", "algo.options.clip_final"),
        ("algo.options.clip_anneal_frames=-1", "algo.options.clip_anneal_frames"),
    ],
)
def test_bad_schedules_are_refused_by_name(override, named):
    with pytest.raises(ConfigError, match=named):
        load_config(None, [override])


def test_a_linear_clip_range_reaches_its_final_value_and_stays():
    ppo = PPOOptions(clip_schedule="linear", clip=0.2, clip_final=0.1, clip_anneal_frames=1000)
    values = [schedules.clip_range(ppo, f, 10**7) for f in (0, 500, 1000, 5000)]
    assert values == pytest.approx([0.2, 0.15, 0.1, 0.1])
    # split between learners as the entropy's, and defaulting to the run's frames
    assert schedules.clip_range(PPOOptions(clip_schedule="linear", clip=0.3), 250, 1000, share=2) == pytest.approx(0.2)
    assert schedules.clip_range(PPOOptions(clip=0.3, clip_final=0.1, clip_anneal_frames=10), 500, 1000) == 0.3


def test_a_clip_schedule_where_nothing_clips_is_named_and_left_out(caplog):
    # PPO's own options: an algorithm without them leaves them out, saying so (a PPO config run in async mode)
    with caplog.at_level("WARNING", logger="fastrl.config"):
        impala = load_config(None, ["engine.mode='async'", "algo.options.clip_schedule='linear'"])
        a2c = load_config(None, ["algo.name='a2c'", "algo.options.target_kl=0.01"])
    assert impala.algo.options == {} and a2c.algo.options == {}
    assert "algo.options.clip_schedule is an option of ppo; algo.name = 'impala' leaves it out" in caplog.text
    assert "algo.options.target_kl is an option of ppo; algo.name = 'a2c' leaves it out" in caplog.text
