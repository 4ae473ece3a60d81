"""Workers (fastrl/process): starting, supervising and ending them; faults, signals, memory limits, layouts."""
