"""Multi-worker training on TensorFlow's own cluster runtime (the schedulers that start one are
in engine/schedulers; the ``worker``, ``preflight`` and ``cluster-script`` commands in engine/commands).

topology           where this process sits in a cluster (TF_CONFIG, a scheduler, a host list); waiting for peers
run_identity       which run a worker belongs to, checked by every worker when the cluster forms
processes          worker processes started to die with us, their logs, how they ended
launcher           ``train`` of a MultiWorkerMirrored run: starts, relays, watches and restarts the workers
ssh_workers        the workers of a host list that ``train`` starts over ssh
parameter_servers  ``train`` of a ParameterServer run: the coordinator and its worker and ps processes
agreement          stop, pause and checkpoint agreed by every worker through one collective
status_reports     a worker's phase and last step, sent to the launcher
stalls             the launcher's stall watch over those reports
leaving            how a worker leaves the cluster once the run has ended
preflight_checks   what one host says about a worker (versions, port, reach, dataset, runs folder, clock), as lines
canary             the all-reduce canary: TensorFlow's collectives over the cluster's addresses, timed and summed
"""
