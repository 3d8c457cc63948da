"""Multi-worker training on TensorFlow's own cluster runtime.

topology           where this process sits in a cluster (TF_CONFIG, Slurm, a host list); waiting for peers
slurm              the cluster of a Slurm job step in Slurm's node order, its ports per job
run_identity       which run a worker belongs to, checked by every worker when the cluster forms
processes          worker processes started to die with us, their logs, how they ended
launcher           ``train`` of a MultiWorkerMirrored run: starts, relays, watches and restarts the workers
ssh_workers        the workers of a host list that ``train`` starts over ssh
parameter_servers  ``train`` of a ParameterServer run: the coordinator and its worker and ps processes
agreement          stop, pause and checkpoint agreed by every worker through one collective
worker_command     ``replica-studio worker``: one worker of a cluster
slurm_script       the sbatch script of one run: continues it when submitted again, requeues before a time limit
kubernetes_manifest  the plain Kubernetes manifest of one run: ConfigMap, headless Service, Indexed Job
script_command     ``replica-studio cluster-script``: an sbatch script, a Kubernetes or a Kubeflow manifest
submit_command     ``replica-studio submit --slurm|--kubernetes``: a new run submitted with sbatch or kubectl
scheduler_command  sbatch and kubectl as submit runs them: found, timed, a refusal as one line
kubernetes_submit  ``submit --kubernetes``: kubectl apply, and the run's local record
kubernetes_runs    ``attach``, ``stop`` and ``resume`` of that record: the chief's output copied, delete, apply
slurm_runs         ``stop`` and ``resume`` of a submitted run: scancel, its job.sbatch submitted again
preflight_checks   what one host says about a worker (versions, port, reach, dataset, runs folder, clock), as lines
preflight_command  ``replica-studio preflight``: every worker checked before a run, then the canary
canary             the all-reduce canary: TensorFlow's collectives over the cluster's addresses, timed and summed
"""
