"""A trained policy after training: which checkpoint a target names (``targets``), the policy rebuilt
from it (``trained_policy``: ``fastrl.load_policy``), played for a few episodes (``play``: ``fastrl eval``),
recorded as a video (``video``) and exported to ONNX or TorchScript (``export``: ``fastrl export``)."""

from fastrl.evaluation.play import evaluate
from fastrl.evaluation.targets import learner_index, learners_of, resolve_checkpoint, run_dir_of
from fastrl.evaluation.trained_policy import TrainedPolicy, load_trained

__all__ = [
    "TrainedPolicy",
    "evaluate",
    "learner_index",
    "learners_of",
    "load_trained",
    "resolve_checkpoint",
    "run_dir_of",
]
