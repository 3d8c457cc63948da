"""Runs a scheduler runs (Slurm, Kubernetes): one package per scheduler, the same module names in each."""
