"""gala across ranks under torchrun (gloo, localhost): 2 ranks x 2 learners on one ring of 4.

Each test launches the real command, ``python -m torch.distributed.run --standalone --nproc-per-node 2
-m fastrl train configs/cartpole_gala.toml ...``. Learner i of rank r is ring member 2r + i: learner 0 of
each rank mixes the messages of the other rank's learner 1, so its ``mixes`` count cross-rank messages.
"""
import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from fastrl.layers.gossip.bounds import fixed_schedule_factor, in_peers
from fastrl.layers.gossip.ring import Board, GossipMessage, Place, RemoteInbox, RemoteOutbox
from fastrl.ranks.cohort import PeerRankLost, join_group
from fastrl.runs.checkpoint import load_checkpoint

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["engine.learners=2", "engine.envs=8", "engine.executors=1", "engine.actors=1", "run.progress=false",
         "run.log_interval_s=0.5"]
TIMEOUT_S = 120


def _launch(run_dir: Path, *overrides: str) -> dict:
    """Run 2 ranks to the end; each rank's summary and metrics lines."""
    sets = [arg for o in [*QUICK, *overrides] for arg in ("--set", o)]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "fastrl",
               "train", "configs/cartpole_gala.toml", "--run-dir", str(run_dir), *sets]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = {}
    for rank, folder in enumerate([run_dir, run_dir / "ranks" / "rank-1"]):
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["ranks"] == 2
        lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        ranks[rank] = {"summary": summary, "lines": lines, "dir": folder}
    return ranks


def _learners(ranks: dict) -> list[dict]:
    """Every learner's summary entry, in ring order (member 2r + i)."""
    return [entry for rank in (0, 1) for entry in ranks[rank]["summary"]["learners"]]


def _log(run_dir: Path) -> str:
    return "".join((run_dir / "logs" / f"rank-{r}.log").read_text() for r in (0, 1))


@pytest.mark.slow  # gala across ranks; the bound on one machine stays in the default run (test_gala.py)
def test_deterministic_ring_over_two_ranks_stays_within_proposition_1(tmp_path):
    """The fixed schedule over 4 learners on 2 ranks: X^{k+1} = W (X^k - Δ^k), so every learner's distance to the
    mean of all 4 at one update stays within √4 λ/(1-λ) L, λ = cos(π/4)."""
    ranks = _launch(tmp_path, "gala.deterministic=true", "run.total_frames=4000")
    learners = _learners(ranks)
    assert [entry["updates"] for entry in learners] == [100] * 4  # 4000 frames / 4 learners / (2 envs x 5 steps)
    assert all(entry["mixes"] == entry["updates"] for entry in learners)  # every update's message, across ranks too
    for rank in (0, 1):  # every measured round of every learner: its distance to the mean of all 4, within its bound
        for line in ranks[rank]["lines"]:
            for entry in line.get("learners", []):
                assert entry["consensus_distance"] <= entry["consensus_bound"], (rank, entry)
        summary = ranks[rank]["summary"]
        assert 0 < summary["consensus_radius"] <= summary["consensus_bound"]
    bound = ranks[0]["summary"]["consensus_bound"]
    assert bound == pytest.approx(ranks[1]["summary"]["consensus_bound"])  # one bound: the largest L of all 4
    assert 0 < bound / fixed_schedule_factor(4) < 10  # L, the largest update norm of any of the 4 learners
    # W = (I + S)/2 on 4 members kills the mode (1, -1, 1, -1): after a mix, x_0 - x̄ = -(x_2 - x̄) and
    # x_1 - x̄ = -(x_3 - x̄). Equal distances for members on different ranks say that the round measured
    # all 4 at one and the same update.
    distance = [entry["consensus_distance"] for entry in learners]
    assert distance[0] == pytest.approx(distance[2], rel=1e-3) and distance[1] == pytest.approx(distance[3], rel=1e-3)
    assert "consensus rounds over 4 learners" in _log(tmp_path)


@pytest.mark.slow  # 20 s of launches; allreduce's bit-identity is tested on one node, the ring across ranks here
def test_allreduce_over_two_ranks_keeps_all_four_learners_bit_identical_to_the_end_at_the_target(tmp_path):
    """One all-reduce over the 4 learners per update; rank 0 judges the target, its learners take part in the
    next all-reduce as "finished", and rank 1's end at that same update: all 4 stop after as many updates."""
    ranks = _launch(tmp_path, "gala.mixing='allreduce'", "run.total_frames=2000000", "run.target_return=15.0")
    models = [load_checkpoint(ranks[rank]["dir"] / "checkpoints" / f"learner-{i}")["model"]
              for rank in (0, 1) for i in (0, 1)]
    for other in models[1:]:
        assert all(torch.equal(models[0][name], other[name]) for name in models[0])
    updates = {entry["updates"] for entry in _learners(ranks)}
    assert len(updates) == 1 and 0 < updates.pop() < 2_000_000 // 40  # together, and long before the budget
    for rank in (0, 1):
        assert ranks[rank]["summary"]["consensus_radius"] == 0.0 == ranks[rank]["summary"]["consensus_bound"]


@pytest.mark.slow
def test_nonblocking_ring_gossips_across_ranks_and_every_rank_ends_when_rank_0_reaches_the_target(tmp_path):
    """gala.max_staleness as on one node; rank 0 judges the target (it sees every rank's episodes), and the
    other rank's learners finish with it instead of running on to their frame budget."""
    ranks = _launch(tmp_path, "gala.deterministic=false", "run.total_frames=2000000", "run.target_return=15.0")
    learners = _learners(ranks)
    assert learners[0]["mixes"] > 0 and learners[2]["mixes"] > 0  # messages from the other rank's learner 1
    assert all(entry["frames"] < 2_000_000 // 4 for entry in learners)  # both ranks ended at the target
    for rank in (0, 1):
        summary = ranks[rank]["summary"]
        assert summary["consensus_bound"] is None or summary["consensus_radius"] <= summary["consensus_bound"]
    log = _log(tmp_path)
    assert "messages sent to learner 0 of rank 1" in log and "messages sent to learner 0 of rank 0" in log


# ---------------------------------------------------------------- the pieces, without torchrun


def test_members_and_their_ring_peers_across_ranks():
    places = [Place(rank, 2, 2) for rank in (0, 1)]
    members = [place.member(i) for place in places for i in (0, 1)]
    assert members == [0, 1, 2, 3] and places[0].members == 4
    crossing = [g for g in members if not places[g // 2].is_local(in_peers("ring", 4, g)[0])]
    assert crossing == [0, 2]  # learner 0 of each rank hears the other rank's learner 1
    assert places[1].name(3) == "learner 1 of rank 1" and places[1].local(3) == 1


def test_a_message_is_its_update_and_its_vector():
    wire = GossipMessage.wire(5, torch.device("cpu"))
    GossipMessage(123456789012, torch.arange(5.0)).encode(wire)
    message = GossipMessage.decode(wire)
    assert message.update == 123456789012 and torch.equal(message.params, torch.arange(5.0))


@dataclass(frozen=True)
class _Launch:
    """What the gossip pieces read of ``spec.ranks``: the store and the group's settings."""

    addr: str
    port: int
    backend: str = "gloo"
    timeout_s: float = 20.0

    def connect(self):
        store = dist.TCPStore(self.addr, self.port, is_master=False, timeout=timedelta(seconds=self.timeout_s),
                              wait_for_workers=False, use_libuv=False)
        return dist.PrefixStore("test/", store)


def _edge(member: int, port: int, sender_ends_first: bool, results) -> None:
    """Member 1 (rank 1) sends member 0 (rank 0) one message and its process ends before it is received;
    ``sender_ends_first``: it said it finished, as a learner at its end does."""
    launch, place = _Launch("127.0.0.1", port), Place(member, 1, 2)
    join_group(launch, member, 2, torch.device("cpu"))
    board, model = Board(launch, place, member), torch.nn.Linear(3, 2)
    n = sum(t.numel() for t in model.state_dict().values())
    if member == 1:
        RemoteOutbox(board, 0, n, torch.device("cpu"), deterministic=False, wait=None).send(model, 1)
        if sender_ends_first:
            board.mark_final()
        board.advance("gone", 1)
        os._exit(0)  # as a killed process: no goodbye on the connection
    inbox = RemoteInbox(board, 1, n, torch.device("cpu"))
    while inbox.newest() < 1 or not board.count("gone"):
        time.sleep(0.01)
    time.sleep(0.5)  # its connection is closed by now
    try:
        results.put(("took", inbox.take(model)))
    except PeerRankLost as exc:
        results.put(("lost", str(exc)))


@pytest.mark.parametrize("sender_ends_first", [False, True])
def test_a_learner_whose_in_peer_died_names_it_and_one_whose_in_peer_finished_goes_on(sender_ends_first):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=False)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    processes = [ctx.Process(target=_edge, args=(g, store.port, sender_ends_first, results)) for g in (0, 1)]
    for process in processes:
        process.start()
    try:
        kind, what = results.get(timeout=60)
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    if sender_ends_first:
        assert (kind, what) == ("took", None)  # no fault: the receiver goes on without that message
    else:
        assert kind == "lost" and "gala learner 0 of rank 0: receiving the gossip message of learner 0 of rank 1 " \
            "failed" in what and "that rank died" in what
