"""Sampling, the data path from env to action: executors step envs into the shared slots and announce
each observation on a channel; actors batch the ready observations, run the policy and write the actions
back (``inline``: both in one process, no queue between them)."""
