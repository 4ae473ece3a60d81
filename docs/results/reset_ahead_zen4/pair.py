import json, sys, statistics
from fastrl.bench.sampling import engine_fps
from fastrl.bench.crafter import bare_env_reading
if __name__ == "__main__":
    mode, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    variants = {"on": ["engine.reset_ahead=true"], "off": ["engine.reset_ahead=false"]}
    out = []
    for r in range(rounds):
        a = bare_env_reading({}, 16, 2, secs)["fps"]
        names = list(variants) if r % 2 == 0 else list(variants)[::-1]
        got = {}
        for n in names:
            res = engine_fps("configs/crafter_ppo.toml", secs, "model", [f"engine.mode='{mode}'", *variants[n]])
            got[n] = res["frames_per_s"]; got[n+"_wait"] = res["time_split_by_role"]["executors"]["waiting"]
        b = bare_env_reading({}, 16, 2, secs)["fps"]
        alone = (a + b) / 2
        row = {"mode": mode, "alone_a": round(a), "alone_b": round(b), **{k: round(v, 3) for k, v in got.items()},
               "on/alone": round(got["on"] / alone, 3), "off/alone": round(got["off"] / alone, 3), "on/off": round(got["on"] / got["off"], 3)}
        print(json.dumps(row), flush=True); out.append(row)
    print("MEDIAN", mode, {k: statistics.median(r[k] for r in out) for k in ("on/alone", "off/alone", "on/off")})
