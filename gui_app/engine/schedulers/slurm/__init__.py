"""A run on Slurm: its sbatch script, its job step's cluster, stop and resume."""
