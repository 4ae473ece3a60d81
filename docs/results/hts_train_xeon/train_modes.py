"""Training pace of CONFIG per setting, paired in each round (order rotated); for Crafter, Crafter alone (16 envs
over 2 bare processes) read before and after:
python train_modes.py CONFIG ROUNDS FRAMES "NAME:KEY=V,KEY=V" ..."""

import json
import subprocess
import sys
import tempfile

from fastrl.bench.crafter import bare_env_reading

PY = sys.executable


def train(config: str, sets: list[str], frames: int) -> dict:
    run = f"{tempfile.mkdtemp()}/run"
    args = [PY, "-m", "fastrl", "train", config, "--run-dir", run]
    for item in [f"run.total_frames={frames}", "run.progress=false", "model.precision=fp32", *sets]:
        args += ["--set", item]
    subprocess.run(args, capture_output=True, text=True, check=True)
    s = json.load(open(f"{run}/summary.json"))
    return {"fps": s["fps"], "train_s": s["train_s"], "split": s["time_split_by_role"]}


if __name__ == "__main__":
    config, rounds, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    crafter = "crafter" in config
    settings = {spec.split(":")[0]: spec.split(":")[1].split(",") for spec in sys.argv[4:]}
    for r in range(rounds):
        names = list(settings)[r % len(settings) :] + list(settings)[: r % len(settings)]
        before = bare_env_reading({}, 16, 2, 8)["fps"] if crafter else None
        got = {name: train(config, settings[name], frames) for name in names}
        line = {"round": r, "config": config, **got}
        line["of_first"] = {name: round(got[name]["fps"] / got[list(settings)[0]]["fps"], 3) for name in got}
        if crafter:
            after = bare_env_reading({}, 16, 2, 8)["fps"]
            line["alone"] = [round(before), round(after)]
            line["of_alone"] = {name: round(got[name]["fps"] / ((before + after) / 2), 3) for name in got}
        print(json.dumps(line), flush=True)
