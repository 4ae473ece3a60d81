import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks


def fastrl(*args: str, cwd=None) -> subprocess.CompletedProcess:
    """The real command, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "fastrl.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=240)


def test_bad_key_is_exit_2_with_a_suggestion():
    result = fastrl("train", "--set", "engine.envz=4")
    assert result.returncode == 2
    assert "unknown config key 'engine.envz'; did you mean 'engine.envs'" in result.stderr


def test_unknown_env_id_is_exit_2_before_anything_starts(tmp_path, in_process):
    assert in_process("train", "--set", "env.id='CartPol-v1'", "--set", f"run.dir='{tmp_path}'") == 2
    assert "'CartPol-v1' is not a registered gymnasium env; did you mean 'CartPole-v1'" in in_process.err


def test_config_lists_every_key():
    result = fastrl("config")
    assert result.returncode == 0
    assert "engine.mode" in result.stdout and "run.total_frames" in result.stdout


def test_train_prints_the_summary_and_writes_the_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    result = fastrl("train", "configs/cartpole_sync.toml", "--set", "run.total_frames=400",
                    "--set", "engine.serial=true", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["frames"] == 400 and summary["stopped_by"] == "total_frames"
    assert (run_dir / "checkpoints" / "latest.pt").is_file()
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("fastrl: stopped at the frame budget (run.total_frames) after ") and "400 frames" in last
    assert last.endswith(f"({run_dir})"), last


def test_a_run_that_reaches_its_target_stops_there_and_says_so(tmp_path, in_process):
    # a random CartPole policy's episodes last ~22 steps: a mean of 5 is reached by the first 10 episodes
    assert in_process("train", "configs/cartpole_sync.toml", "--set", "run.total_frames=100000", "--set",
                      "run.target_return=5.0", "--set", "run.return_window=10", "--set", "engine.serial=true",
                      "--run-dir", str(tmp_path / "run")) == 0
    summary = json.loads(in_process.out.strip().splitlines()[-1])
    assert summary["stopped_by"] == "target" and summary["frames"] < 100000, summary
    assert summary["target_return"] == 5.0 and summary["final_return_mean"] >= 5.0
    last = in_process.err.strip().splitlines()[-1]
    assert last.startswith("fastrl: reached the target in ") and "over the last 10 episodes >= 5" in last, last


def test_resume_continues_a_run_and_refuses_a_config_beside_it(tmp_path, in_process):
    run_dir = tmp_path / "run"
    assert in_process("train", "configs/cartpole_sync.toml", "--set", "run.total_frames=200",
                      "--set", "engine.serial=true", "--run-dir", str(run_dir)) == 0, in_process.err
    assert in_process("train", "configs/cartpole_sync.toml", "--resume", str(run_dir)) == 2
    assert "give either CONFIG or --resume" in in_process.err
    assert in_process("train", "--resume", str(run_dir), "--set", "run.total_frames=400") == 0, in_process.err
    assert json.loads(in_process.out.strip().splitlines()[-1])["frames"] == 400


def test_cleanup_reports_when_there_is_nothing_to_free():
    result = fastrl("cleanup")
    assert result.returncode == 0 and result.stdout.startswith("fastrl cleanup:")


def test_help_and_a_refused_key_answer_without_importing_torch():
    """torch takes ~2 s to import: `fastrl --help` and a config refused for a bad key should not wait for it."""
    probe = (
        "import sys\n"
        "from fastrl.cli import main\n"
        "assert main(['train', '--set', 'engine.envz=4']) == 2\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
