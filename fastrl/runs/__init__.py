"""A run's files: its directory (``run_dir``: config.toml, metrics.jsonl, logs, pids), its checkpoints
(``checkpoint``: written atomically at barriers, with the envs' states) and going on from one
(``resume``)."""
