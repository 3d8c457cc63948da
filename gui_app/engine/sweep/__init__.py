"""Hyperparameter sweeps on Optuna: ``replica-studio sweep`` (docs/sweeps.md; the command is engine/commands/sweep.py).

folder (what a sweep's folder holds), study (the Optuna study), trial_process
(one trial's detached engine process and its events), driver (the loop, and taking a sweep up
again), status (the trials as rows).
"""
