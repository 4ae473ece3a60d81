"""Checks that a model's rows do not depend on their batch neighbours (the actors' fixed micro-batches),
and the Atari-shaped frames they are checked on."""
import numpy as np
import torch

from fastrl.models.microbatch import forward_microbatched

ATARI = (4, 84, 84)


def random_frames(n: int, shape=ATARI, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, *shape), dtype=torch.uint8, generator=g)


def assert_rows_batch_invariant(model, x, micro_batch, rng, extra_partitions=3):
    """Every row's output is bit-identical to the row forwarded alone, in batches of 1..len(x)
    (random subsets in random order) and in random partitions of a permutation of all rows."""
    n = x.shape[0]
    with torch.inference_mode():
        alone = [forward_microbatched(model, x[i:i + 1], micro_batch) for i in range(n)]

        def check(idx):
            logits, value = forward_microbatched(model, x[idx], micro_batch)
            for row, i in enumerate(idx.tolist()):
                assert torch.equal(logits[row], alone[i][0][0]), (len(idx), i)
                assert torch.equal(value[row], alone[i][1][0]), (len(idx), i)

        for size in range(1, n + 1):
            check(torch.from_numpy(rng.permutation(n)[:size]))
        for _ in range(extra_partitions):
            perm = torch.from_numpy(rng.permutation(n))
            cuts = np.sort(rng.choice(np.arange(1, n), size=rng.integers(1, 8), replace=False))
            for part in np.split(perm.numpy(), cuts):
                check(torch.from_numpy(part))
