"""A long run watched from outside: every process's resident memory, open files and the run's shared memory,
sampled while ``fastrl plot`` reads the run, with a ``kill -9`` of the main process at a random time and a
resume from the newest exact checkpoint, which is checked to go on bit for bit.

The run is ``fastrl train CONFIG`` (the default job unless named) with a checkpoint every
``--checkpoint-s``. Every ``--sample-s`` each process of the run (main, fork server, workers, by role) gives
its VmRSS and its count of open fds, and ``/dev/shm`` the run's segments; every ``--plot-s`` ``fastrl plot``
draws the run as it runs. At a random time in the middle half of ``--minutes`` the main process is
SIGKILLed; the soak then resumes the run from the newest exact checkpoint for the rest of the time.

Exactness: the run directory as the kill left it is set aside, and after the soak's time a copy of it is
resumed from its second newest exact checkpoint, with a checkpoint due at the newest one's frames: that
checkpoint must hold the newest one's parameters bit for bit, which the run wrote without a stop (the
engine's promise for ``sync`` and ``hts``: a resumed run is the run that was never stopped).

Memory: the slope of each role's RSS in MiB per hour, by least squares over each phase's samples after its
first ``--settle-s`` (allocators and caches fill first), for the run before the kill and for the resumed
run; fds and segments as their range. The JSON lines go to ``OUT/samples.jsonl`` as they come, the
summary to stdout and ``OUT/summary.json``, and ``OUT/memory.png`` plots RSS against time by role.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastrl.config import ConfigError, load_config
from fastrl.telemetry.memory import rss_mb

MIB = 2**20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default job)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--minutes", type=float, default=120.0, help="the soak's length (default 120)")
    parser.add_argument("--checkpoint-s", type=float, default=180.0, help="seconds between checkpoints (180)")
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between samples (30)")
    parser.add_argument("--plot-s", type=float, default=300.0, help="seconds between fastrl plot reads (300)")
    parser.add_argument("--settle-s", type=float, default=600.0, help="each phase's first seconds left out (600)")
    parser.add_argument("--seed", type=int, default=None, help="seeds the kill's time (default: random)")
    parser.add_argument("--out", default="soak", help="folder for the run, the samples and the plot (soak)")


def run(args: argparse.Namespace) -> int:
    if args.minutes <= 0 or args.sample_s <= 0 or args.checkpoint_s <= 0:
        print("fastrl: bad options: --minutes, --sample-s and --checkpoint-s must be > 0", file=sys.stderr)
        return 2
    try:
        load_config(args.config, args.set)  # bad input refused before anything starts
    except ConfigError as exc:
        print(f"fastrl: bad config: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        print(f"fastrl: bad options: --out {out} is not empty", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    summary = Soak(args, out).run()
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))
    return 0 if summary["exact"] and summary["status"] == "ok" and not summary["leftover_segments"] else 1


class Soak:
    def __init__(self, args: argparse.Namespace, out: Path):
        self.args, self.out = args, out
        self.run_dir = out / "run"
        self.samples = out / "samples.jsonl"
        self.begun = time.monotonic()
        self.end = self.begun + args.minutes * 60
        rng = random.Random(args.seed)
        self.kill_at = self.begun + args.minutes * 60 * rng.uniform(0.25, 0.75)
        self.plots = {"ok": 0, "failed": 0}
        self.verified: dict = {}
        self.mains: list[int] = []  # the soak's own main processes: their segments must be gone at its end

    def run(self) -> dict:
        from fastrl.bench.machine import machine_info

        first = self._train(["--run-dir", str(self.run_dir), *self._sets(fresh=True)])
        phases = {"first": self._watch(first, "first", until=self.kill_at)}
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_s = round(time.monotonic() - self.begun, 1)
        time.sleep(2.0)  # the workers see their main process gone (PR_SET_PDEATHSIG) and the learner saves
        checkpoint = self._newest_exact()
        shutil.copytree(self.run_dir, self.out / "as-killed")  # the run as the kill left it, for the exactness check
        resumed = self._train(["--resume", str(checkpoint), *self._sets(fresh=False)])
        phases["resumed"] = self._watch(resumed, "resumed", until=self.end)
        resumed.send_signal(signal.SIGTERM)  # the soak's end: a scheduler's stop
        code = resumed.wait(timeout=300)
        self._plot_memory()
        exact = self._verify()  # after the soak's clock: it does not eat into the watched time
        return {
            "bench": "soak",
            "config": self.args.config or "the default job",
            "overrides": self.args.set,
            "minutes": self.args.minutes,
            "killed_at_s": killed_s,
            "resumed_from": checkpoint.name,
            "exact": exact,
            "exactness": self.verified,
            "resumed_exit": code,
            "status": "ok" if code in (0, 143) else f"the resumed run exited with {code}",
            "plots": self.plots,
            "phases": phases,
            "leftover_segments": [name for main in self.mains for name in _segments_of(main)],
            "machine": machine_info(),
        }

    def _sets(self, fresh: bool) -> list[str]:
        sets = [f"run.checkpoint_interval_s={self.args.checkpoint_s}", "run.progress=false", "run.target_return=inf"]
        if fresh:
            sets += [*self.args.set, "run.total_frames=10_000_000_000"]
        return [arg for s in sets for arg in ("--set", s)]

    def _train(self, args: list[str]) -> subprocess.Popen:
        command = [sys.executable, "-m", "fastrl.cli", "train"]
        if "--resume" not in args and self.args.config:
            command.append(self.args.config)
        log = open(self.out / f"train-{len(list(self.out.glob('train-*.log')))}.log", "w")
        proc = subprocess.Popen([*command, *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.mains.append(proc.pid)
        return proc

    def _watch(self, proc: subprocess.Popen, phase: str, until: float) -> dict:
        """Samples until ``until`` (or the run's end); the phase's slopes and ranges."""
        pids = _wait_for_pids(self.run_dir, proc)
        started = time.monotonic()
        rows, last_plot = [], started
        while time.monotonic() < until and proc.poll() is None:
            row = {"phase": phase, "t_s": round(time.monotonic() - self.begun, 1), **self._sample(pids)}
            rows.append(row)
            with open(self.samples, "a") as f:
                f.write(json.dumps(row) + "\n")
            if time.monotonic() - last_plot >= self.args.plot_s:
                self._read_plot()
                last_plot = time.monotonic()
            time.sleep(max(0.0, min(self.args.sample_s, until - time.monotonic())))
        return _phase_summary(rows, started - self.begun + self.args.settle_s, proc.poll())

    def _sample(self, pids: dict[str, int]) -> dict:
        roles = {}
        for role, pid in pids.items():
            rss, fds = rss_mb(pid), _open_fds(pid)
            if rss is not None and fds is not None:
                roles[role] = {"rss_mib": round(rss, 1), "fds": fds}
        segments = _segments_of(pids["main"])
        return {"roles": roles, "segments": len(segments), "segment_mib": round(sum(segments.values()) / MIB, 1)}

    def _read_plot(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "fastrl.cli", "plot", str(self.run_dir), "--out", str(self.out / "curve.png")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.plots["ok" if done.returncode == 0 else "failed"] += 1

    def _newest_exact(self) -> Path:
        from fastrl.runs.checkpoint import load_checkpoint

        for path in sorted((self.run_dir / "checkpoints").glob("ckpt-*.pt"), reverse=True):
            if load_checkpoint(path).get("exact"):
                return path
        raise RuntimeError(f"no exact checkpoint in {self.run_dir / 'checkpoints'}")

    def _verify(self) -> bool:
        """The run as killed, resumed from its second newest exact checkpoint in a copy of its own, with a
        checkpoint due exactly at the newest one's frames: that checkpoint must hold the newest one's parameters,
        which the run wrote without a stop. The run's own config is kept whole (its schedules read
        ``run.total_frames``); the copy is stopped with SIGTERM once the checkpoint is written."""
        from fastrl.runs.checkpoint import load_checkpoint

        base = self.out / "as-killed"
        exact = [p for p in sorted((base / "checkpoints").glob("ckpt-*.pt")) if load_checkpoint(p).get("exact")]
        if len(exact) < 2:
            raise RuntimeError(
                "fewer than two exact checkpoints before the kill: a longer soak or a shorter --checkpoint-s"
            )
        older, newer = exact[-2], exact[-1]
        target = self.out / "verify"
        shutil.copytree(base, target)
        gap = int(load_checkpoint(newer)["frames"]) - int(load_checkpoint(older)["frames"])
        sets = [f"run.checkpoint_interval_frames={gap}", "run.checkpoint_interval_s=inf", "run.progress=false"]
        copy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fastrl.cli",
                "train",
                "--resume",
                str(target / "checkpoints" / older.name),
                *[arg for s in sets for arg in ("--set", s)],
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        written = target / "checkpoints" / newer.name
        while not written.exists() and copy.poll() is None:
            time.sleep(0.5)
        copy.send_signal(signal.SIGTERM)
        _, err = copy.communicate(timeout=600)
        if not written.exists():
            raise RuntimeError(f"the resumed copy ended (exit {copy.returncode}) before {newer.name}: {err[-2000:]}")
        same = _digest(written) == _digest(newer)
        self.verified = {"from": older.name, "to": newer.name, "frames_between": gap, "same_parameters": same}
        shutil.rmtree(target)
        shutil.rmtree(base)
        return same

    def _plot_memory(self) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = [json.loads(line) for line in self.samples.read_text().splitlines()]
        fig, ax = plt.subplots(figsize=(9, 4.5))
        for role in sorted({r for row in rows for r in row["roles"]}):
            points = [(row["t_s"] / 60, row["roles"][role]["rss_mib"]) for row in rows if role in row["roles"]]
            ax.plot(*zip(*points), label=role)
        ax.axvline((self.kill_at - self.begun) / 60, color="grey", linestyle="--", label="kill -9, resume")
        ax.set_xlabel("minutes")
        ax.set_ylabel("resident memory (MiB)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(self.out / "memory.png", dpi=110)


def _wait_for_pids(run_dir: Path, proc: subprocess.Popen, timeout: float = 300.0) -> dict[str, int]:
    """The run's processes by role, once pids.json names them: main, its fork server, each worker."""
    deadline = time.monotonic() + timeout
    path = run_dir / "pids.json"
    while True:
        try:
            data = json.loads(path.read_text())
            if data.get("main") == proc.pid:
                break
        except (OSError, ValueError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the run did not start (exit {proc.poll()}); see {run_dir.parent}/train-*.log")
        time.sleep(0.2)
    pids = {"main": data["main"], **data["workers"]}
    server = _fork_server_of(data["main"])
    if server is not None:
        pids["fork-server"] = server
    return pids


def _fork_server_of(main: int) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == main and b"forkserver" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return int(entry)
            except (OSError, ValueError, IndexError):
                continue
    return None


def _open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _segments_of(main: int) -> dict[str, int]:
    """fastrl's segments in /dev/shm of the run whose main process is ``main``: name -> bytes."""
    from fastrl.buffers.arena import SHM_DIR, list_segments, segment_owner_pid

    out = {}
    for name in list_segments():
        if segment_owner_pid(name) == main:
            try:
                out[name] = os.stat(os.path.join(SHM_DIR, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return out


def _phase_summary(rows: list[dict], settle_t: float, exit_code: int | None) -> dict:
    settled = [row for row in rows if row["t_s"] >= settle_t] or rows
    roles = sorted({r for row in rows for r in row["roles"]})
    per_role = {}
    for role in roles:
        points = [
            (row["t_s"] / 3600, row["roles"][role]["rss_mib"], row["roles"][role]["fds"])
            for row in settled
            if role in row["roles"]
        ]
        if not points:
            continue
        hours, rss, fds = zip(*points)
        per_role[role] = {
            "rss_mib_first": rss[0],
            "rss_mib_last": rss[-1],
            "rss_slope_mib_per_h": round(_slope(hours, rss), 2),
            # a step (a cache filled once) and a leak have the same overall slope; only a leak goes on climbing
            "rss_slope_second_half_mib_per_h": round(_slope(hours[len(hours) // 2 :], rss[len(rss) // 2 :]), 2),
            "fds_min": min(fds),
            "fds_max": max(fds),
        }
    return {
        "samples": len(rows),
        "settled_samples": len(settled),
        "span_min": round((rows[-1]["t_s"] - rows[0]["t_s"]) / 60, 1) if rows else 0.0,
        "exit_before_end": exit_code,
        "roles": per_role,
        "segments": sorted({row["segments"] for row in rows}),
        "segment_mib": sorted({row["segment_mib"] for row in rows}),
    }


def _slope(xs, ys) -> float:
    """Least-squares slope of ys over xs (0 for fewer than 2 distinct xs)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var


def _digest(path: Path) -> str:
    from fastrl.runs.checkpoint import load_checkpoint

    h = hashlib.sha256()
    for key, tensor in sorted(load_checkpoint(path)["model"].items()):
        h.update(key.encode() + tensor.numpy().tobytes())
    return h.hexdigest()
