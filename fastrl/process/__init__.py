"""Processes: the main process plans the run, starts and supervises the workers and ends every run
cleanly (signals, watchdog, faults, the last checkpoint). ``component`` is what every role offers
and the one factory that builds them; ``worker`` is every worker process's body, ``serial`` runs the
same components round-robin in one process."""
