"""Run directories (fastrl/runs): checkpoints, what is trusted, a full disk, exact resume."""
