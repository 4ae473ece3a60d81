"""The env backends and adapters (fastrl/envs: Atari, ale_vector, envpool, MiniGrid, Crafter) and the spaces they
give (Box, Dict, action masks)."""
