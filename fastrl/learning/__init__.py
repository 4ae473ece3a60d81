"""Learning: the learner waits for full slots, applies the mode's schedule of update rules (A2C, delayed
A2C, PPO, IMPALA), publishes θ and releases the envs; gala learners also gossip with each other."""
