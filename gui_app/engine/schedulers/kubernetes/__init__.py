"""A run on Kubernetes: its manifest, submit, its pods' cluster, stop and resume."""
