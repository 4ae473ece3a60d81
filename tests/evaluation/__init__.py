"""A trained policy used (fastrl/evaluation): fastrl eval, load_policy, export and video."""
