"""``fastrl tune``: settings searched for the time a config takes to reach a score (Optuna: TPE, a median pruner
on the learning curve, a resumable SQLite study), each trial an ordinary fastrl run."""
