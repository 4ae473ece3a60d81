"""fastrl tune (fastrl/tuning): Optuna studies of a config's time to a score."""
