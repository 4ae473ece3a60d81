import json, sys, statistics
from fastrl.bench.sampling import engine_fps
if __name__ == "__main__":
    rounds, secs = int(sys.argv[1]), float(sys.argv[2]); extra = sys.argv[3:]
    modes = ["sync", "hts", "async"]
    for r in range(rounds):
        order = modes[r % 3:] + modes[:r % 3]
        got = {}
        for m in order:
            res = engine_fps("configs/crafter_ppo.toml", secs, "model", [f"engine.mode='{m}'", *extra])
            got[m] = res["frames_per_s"]; got[m + "_split"] = res["time_split_by_role"]["executors"]
        print(json.dumps({"round": r, **{m: got[m] for m in modes}, "hts/sync": round(got["hts"]/got["sync"], 3), "async/sync": round(got["async"]/got["sync"], 3), "splits": {m: got[m + "_split"] for m in modes}}), flush=True)
