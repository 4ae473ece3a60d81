"""Tree against tree, paired by rounds: each round runs both trees, the order reversed every other round.
sampling: `fastrl bench sampling` (engine frames/s as a share of the raw emulator in the same run: of_raw);
train: the default job (`fastrl train`, pong_sync) for a fixed budget, frames/s from its summary."""
import json, os, subprocess, sys, tempfile, statistics
TREES = {"before": "/tmp/wt-before", "after": "/work/main"}
PY = "/work/venv/bin/python"
def run(tree, args):
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([PY, "-m", "fastrl", *args], cwd=tree, env=env, capture_output=True, text=True)
    return out
def sampling(tree):
    out = run(tree, ["bench", "sampling", "configs/pong_sync.toml", "--rounds", "1", "--seconds", "8"])
    line = [l for l in out.stdout.splitlines() if l.startswith("{")]
    return json.loads(line[-1]) if line else {"error": out.stderr[-500:]}
def train(tree):
    d = tempfile.mkdtemp()
    out = run(tree, ["train", "--run-dir", f"{d}/run", "--set", "run.total_frames=60000"])
    try:
        return json.load(open(f"{d}/run/summary.json"))
    except Exception:
        return {"error": out.stderr[-500:]}
what = sys.argv[1]; rounds = int(sys.argv[2])
for r in range(rounds):
    order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
    for name in order:
        res = sampling(TREES[name]) if what == "sampling" else train(TREES[name])
        print(json.dumps({"round": r, "tree": name, **res}), flush=True)
