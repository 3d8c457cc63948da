"""A run applied to Kubernetes, followed, stopped and resumed from its local record
(``RUN_DIR/kubernetes_job.json``: its backend, gui_app/core/backends/kubernetes.py).

Its run directory is on the cluster's volume; here is a run directory of the same name whose
``events.jsonl`` and ``engine.log`` are copied from the chief's output (:class:`Mirror`):
``kubectl logs -f --prefix`` on the chief pod, event lines into ``events.jsonl``, the rest into
``engine.log``. kubectl prints a pod's whole output from its start every time it is asked, so
the record keeps, per pod, the lines of the local copies where its output begins: a follow
again (the window reopened, a second ``attach``) skips what is there and adds the rest -- never
a line twice, none lost -- and a new pod (the Job replaced a failed one, or the run resumed)
starts at the end. One process copies at a time (a lock file); the others read the copies.
The events name the local run directory (``run_dir``), the one this machine can open.

- ``attach RUN_DIR``: copies while it follows the copy, until the chief's output ends and the
  Job no longer runs; its ``stop`` word deletes the Job.
- ``stop RUN_DIR``: ``kubectl delete job`` with its pods (SIGTERM: the workers agree on a stop
  with a checkpoint on the volume and exit 143), then copies until the chief's run_finished.
- ``resume RUN_DIR``: applies the kept manifest again (``worker --resume-or-start``: the pods go on
  from the checkpoint); prints the Job's name and the run directory, as ``submit`` does.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import threading
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.backends import kubernetes
from gui_app.core.backends.base import UNKNOWN, JobState
from gui_app.core.backends.kubernetes import MANIFEST_FILE, KubernetesBackend
from gui_app.core.line_follow import count_lines
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK, say
from gui_app.engine.schedulers import tools
from gui_app.engine.schedulers.kubernetes import submit as kubernetes_submit
from gui_app.engine.schedulers.tools import SubmitError

LOCK_FILE = "kubernetes_follow.lock"
RETRY_S = 3.0  # kubectl logs again while the Job runs but its chief's output has ended (a new pod starts)
LOCK_RETRY_S = 0.5


class Mirror(threading.Thread):
    """Copies the chief's output into the local record until it has ended and the Job no longer
    runs, or :meth:`close`."""

    def __init__(self, run_dir: str | Path) -> None:
        super().__init__(name="kubernetes-mirror", daemon=True)
        self.run_dir = Path(run_dir).absolute()
        self.error = ""  # kubectl's last line of its own, when the Job's state is unknown at the end
        self._closed = threading.Event()
        self._proc: subprocess.Popen | None = None

    def close(self) -> None:
        self._closed.set()
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()

    def run(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no lock (as gui_app/core/run_lock.py)
            fcntl = None  # type: ignore[assignment]
        with open(self.run_dir / LOCK_FILE, "a") as lock:
            while fcntl is not None:  # another process copies: wait for it to end (then little is left to add)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if self._closed.wait(LOCK_RETRY_S):
                        return
            try:
                self._copy()
            except (OSError, SubmitError) as exc:
                self.error = str(exc)

    def _copy(self) -> None:
        record = tools.record(KubernetesBackend(self.run_dir))
        kubectl = kubernetes_submit.kubectl()
        written = [count_lines(self.run_dir / rundir.EVENTS_FILE), count_lines(self.run_dir / rundir.LOG_FILE)]
        chief = (f"batch.kubernetes.io/job-name={record.job},batch.kubernetes.io/job-completion-index=0")
        command = [kubectl, "logs", "-f", "--prefix", "-l", chief, "--tail=-1", *record.kubectl_args()]
        with (self.run_dir / rundir.EVENTS_FILE).open("a", encoding="utf-8") as events, \
                (self.run_dir / rundir.LOG_FILE).open("a", encoding="utf-8") as log:
            while not self._closed.is_set():
                self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                              stdin=subprocess.DEVNULL, errors="replace")
                seen: dict[str, list[int]] = {}  # this stream's lines of each pod so far: events, log
                finished = False  # the stream's last event was a run_finished
                assert self._proc.stdout is not None
                for raw in self._proc.stdout:
                    pod, text = _split(raw)
                    if not pod:  # kubectl's own: "No resources found", "waiting to start", an error
                        self.error = text.strip() or self.error
                        continue
                    if pod not in record.pods:  # a pod not followed before: its output goes after what is here
                        record.pods[pod] = list(written)
                        kubernetes.write_job(self.run_dir, record)
                    event = self._event(text)
                    line = json.dumps(event) + "\n" if event is not None else None
                    kind = 0 if event is not None else 1
                    finished = event["type"] == "run_finished" if event is not None else finished
                    counts = seen.setdefault(pod, [0, 0])
                    if record.pods[pod][kind] + counts[kind] >= written[kind]:  # not copied before
                        out = events if kind == 0 else log
                        out.write(line if line is not None else text.rstrip("\n") + "\n")
                        out.flush()
                        written[kind] += 1
                    counts[kind] += 1
                self._proc.wait()
                record = kubernetes.read_job(self.run_dir) or record  # a resume applies the Job again
                state = kubernetes.job_state(record)
                # deleted (Stop) and its chief has said how the run ended: no pod comes after it
                if self._closed.is_set() or not state.active or (finished and state.reason == kubernetes.DELETING):
                    if state.state != UNKNOWN:
                        self.error = ""  # what kubectl said while the pod started is no reason
                    return
                self._closed.wait(RETRY_S)

    def _event(self, text: str) -> dict | None:
        """``text``'s event for events.jsonl (its run_dir: the local one); None when it is no event."""
        try:
            event = json.loads(text)
        except ValueError:
            return None
        if not isinstance(event, dict) or "type" not in event:
            return None
        if "run_dir" in event:
            event["run_dir"] = str(self.run_dir)
        return event


def _split(raw: str) -> tuple[str, str]:
    """``[pod/NAME/CONTAINER] TEXT`` (kubectl logs --prefix) -> (NAME, TEXT); a line without it
    (kubectl's own: "No resources found") belongs to no pod: ""."""
    if raw.startswith("[pod/") and "] " in raw:
        prefix, text = raw.split("] ", 1)
        return prefix[len("[pod/"):].split("/")[0], text
    return "", raw


def current(backend: KubernetesBackend) -> tuple[str, JobState]:
    """The run's Job and what kubectl says of it (OSError: no readable record)."""
    job = tools.record(backend)
    return job.job, kubernetes.job_state(job)


def wait_stopped(backend: KubernetesBackend, job: str, timeout: float) -> tuple[bool, str]:
    """After the Job's deletion (its pods stop with a checkpoint): copy the chief's output until it
    ends. (True, how the Job ended) or (False, the line that says it still runs)."""
    mirror = Mirror(backend.run_dir)
    mirror.start()
    mirror.join(timeout)
    if mirror.is_alive():
        mirror.close()
        return False, (f"Kubernetes job {job} still runs {timeout:g} s after it was deleted; its pods are killed "
                       "after their grace period")
    return True, f"Kubernetes job {job} deleted"


def resume(args: argparse.Namespace, backend: KubernetesBackend) -> int:
    """Apply the kept manifest again: the pods continue the run from its checkpoint on the volume."""
    run_dir = Path(args.run_dir).expanduser().absolute()
    if getattr(args, "set", None):
        say("resume", "--set: a Kubernetes run's config is in its manifest (job.yaml); submit a new run instead")
        return EXIT_BAD_INPUT
    if not tools.may_resume(backend, current):
        return EXIT_BAD_INPUT
    try:
        job = tools.record(backend)
        failed = kubernetes.delete(job, wait=True)  # a Job that ended is still there: apply would keep it
        if failed is not None:
            raise SubmitError(failed)
        kubernetes_submit.apply(run_dir / MANIFEST_FILE, job.job, job.kubectl_args())
        kubernetes.record_job(run_dir, job.job, job.namespace, job.context)
    except (SubmitError, OSError) as exc:
        say("resume", str(exc))
        return EXIT_BAD_INPUT
    print(job.job)
    print(run_dir, flush=True)
    return EXIT_OK
