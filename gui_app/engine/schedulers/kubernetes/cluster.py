"""The cluster of a Kubernetes Indexed Job's pods, from the environment (TensorFlow-free).

No operator sets ``TF_CONFIG`` here: the manifest (manifest.py) gives every pod the
job and service names, the worker count and the port, and Kubernetes adds the pod's
``JOB_COMPLETION_INDEX``. Pod ``i`` of an Indexed Job whose ``subdomain`` is a headless service
is reached as ``JOB-i.SERVICE``, so the worker list is those names in index order (index 0 is
the chief) -- every pod builds the same list, and the run identity check
(engine/cluster/run_identity.py, with the Job's uid) refuses a pod that built another.
``RS_K8S_ADDRESSES`` (``host:port`` in index order) replaces the names where pods are reached
otherwise, and lets the tests run the pods as processes on 127.0.0.1 with ports of their own.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from gui_app.core.cluster_addresses import tf_config as tf_config_json
from gui_app.core.config import ConfigError

JOB_ENV, SERVICE_ENV, WORKERS_ENV, PORT_ENV = "RS_K8S_JOB", "RS_K8S_SERVICE", "RS_K8S_WORKERS", "RS_K8S_PORT"
ADDRESSES_ENV = "RS_K8S_ADDRESSES"
JOB_UID_ENV = "RS_K8S_JOB_UID"  # the Job's uid (the downward API): part of the run identity
INDEX_ENV = "JOB_COMPLETION_INDEX"  # set by Kubernetes in every pod of an Indexed Job
PORT = 2222  # every pod has its own address, so one port serves all (TensorFlow's usual one)
# A stopped run (SIGTERM: the pod evicted or deleted) ends with the code a container killed by
# SIGTERM reports, not 0: a pod that exits 0 is a completed index, and the Job would then call a
# stopped run complete. Failed, the Job starts the pod again and it continues from the checkpoint.
EXIT_STOPPED = 143


def workers(env: Mapping[str, str] = os.environ) -> list[str]:
    """``host:port`` of every pod of the job, index order."""
    if env.get(ADDRESSES_ENV):
        return [a.strip() for a in env[ADDRESSES_ENV].split(",") if a.strip()]
    missing = [name for name in (JOB_ENV, SERVICE_ENV, WORKERS_ENV) if not env.get(name)]
    if missing:
        raise ValueError(f"{', '.join(missing)} not set (the manifest of cluster-script --kubernetes sets them)")
    port = int(env.get(PORT_ENV) or PORT)
    return [f"{env[JOB_ENV]}-{i}.{env[SERVICE_ENV]}:{port}" for i in range(int(env[WORKERS_ENV]))]


def tf_config(env: Mapping[str, str] = os.environ) -> str:
    """This pod's ``TF_CONFIG``; ConfigError when the environment is not an Indexed Job's."""
    try:
        hosts = workers(env)
        if not env.get(INDEX_ENV):
            raise ValueError(f"{INDEX_ENV} not set (the Job must have completionMode: Indexed)")
        index = int(env[INDEX_ENV])
        if not 0 <= index < len(hosts):
            raise ValueError(f"{INDEX_ENV} is {index}, but the job has {len(hosts)} workers")
    except ValueError as exc:
        raise ConfigError(f"--cluster kubernetes: {exc}") from None
    return tf_config_json({"worker": hosts}, "worker", index)
