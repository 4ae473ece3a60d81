"""The modes (fastrl/modes) end to end: sync, hts and async schedules, process layouts, run-ahead, the delayed
gradient."""
