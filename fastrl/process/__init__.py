"""Processes: the main process plans the run, starts and supervises the workers and ends every run
cleanly (signals, watchdog, faults, the last checkpoint); ``serial`` runs the same components in one
process; ``worker`` is every worker process's body."""
