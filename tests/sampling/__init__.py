"""Sampling (fastrl/sampling): the channels between executors and actors, and who plays a run's rows."""
