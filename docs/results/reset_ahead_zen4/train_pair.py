import json, sys, subprocess, tempfile, os
from fastrl.bench.crafter import bare_env_reading
PY = sys.executable
def train(setting, frames):
    d = tempfile.mkdtemp()
    subprocess.run([PY, "-m", "fastrl", "train", "configs/crafter_ppo.toml", "--run-dir", f"{d}/run", "--set", f"run.total_frames={frames}",
                    "--set", f"engine.reset_ahead={setting}", "--set", "run.progress=false"], capture_output=True, text=True)
    s = json.load(open(f"{d}/run/summary.json"))
    return {"fps": s["fps"], "env_steps_per_s": s["env_steps_per_s"], "train_s": s["train_s"], "reset_ahead": s.get("episodes_reset_ahead"), "episodes": s["episodes"], "split": s["time_split_by_role"]["executors"]}
if __name__ == "__main__":
    rounds, frames = int(sys.argv[1]), int(sys.argv[2])
    for r in range(rounds):
        a = bare_env_reading({}, 16, 2, 8)["fps"]
        order = ["true", "false"] if r % 2 == 0 else ["false", "true"]
        got = {s: train(s, frames) for s in order}
        b = bare_env_reading({}, 16, 2, 8)["fps"]
        alone = (a + b) / 2
        print(json.dumps({"round": r, "alone": [round(a), round(b)], **got, "on/off": round(got["true"]["fps"] / got["false"]["fps"], 3),
                          "on/alone": round(got["true"]["fps"] / alone, 3), "off/alone": round(got["false"]["fps"] / alone, 3)}), flush=True)
