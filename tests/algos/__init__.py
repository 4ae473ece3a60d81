"""The algorithms (fastrl/algos): their losses, options, registry, schedules, advantages and time limits, and each
one learning to a score."""
