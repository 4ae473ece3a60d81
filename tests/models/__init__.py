"""The models (fastrl/models): networks, the registry, micro-batched forwards, compiling, LSTMs, normalisers."""
