"""Policy networks: ``forward(obs) -> (head [B, H] float32, value [B] float32)``.

The head is logits for Discrete actions, side-by-side logits for MultiDiscrete, and D means then
D log-stds for Box actions (``fastrl.models.distributions`` reads it; ``H = ActionSpec.head_size``).

``build_model`` builds one by name (see ``registry``); ``forward_microbatched`` is the
batch-invariant forward the actor uses (see ``microbatch``).
"""

from fastrl.models.cnn import ImpalaResNet, NatureCNN, ShallowCNN
from fastrl.models.microbatch import forward_microbatched
from fastrl.models.mlp import MLPPolicy
from fastrl.models.registry import build_model, register_model

__all__ = [
    "ImpalaResNet",
    "MLPPolicy",
    "NatureCNN",
    "ShallowCNN",
    "build_model",
    "forward_microbatched",
    "register_model",
]
