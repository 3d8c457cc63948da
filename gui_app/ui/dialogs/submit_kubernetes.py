"""SubmitKubernetesDialog (Run -> Submit to Kubernetes…): the run on the forms as a Kubernetes Job.

It runs ``submit CONFIG --kubernetes`` (engine/schedulers/kubernetes/submit.py) as an engine job, off
the GUI thread, with what the form asks of the cluster (KubernetesOptions): the image, the
namespace, the PersistentVolumeClaim of the runs volume, GPUs per worker, CPU and memory
requests. kubectl talks to the cluster of its current context. The run's local record goes into
the window's runs folder; ``submit`` prints the job name, the run directory on the volume and
the record: ``submitted(job, record)``. kubectl refusing (no cluster reachable, no permission) or
a bad quantity is its one line, shown here.
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLineEdit, QSpinBox, QWidget

from gui_app.core.config import RunConfig
from gui_app.ui.dialogs.submit import SubmitDialog

STRATEGIES = ("multi_worker_mirrored",)  # the plain manifest's (parameter servers need Kubeflow's operator)
DEFAULT_IMAGE, DEFAULT_PVC = "replica-studio:latest", "replica-studio-runs"  # KubernetesOptions' defaults


class SubmitKubernetesDialog(SubmitDialog):
    submitted = Signal(str, str)  # job name, the run's local record

    starting_text = "Applying…"
    scheduler, worker_runs_in, program, done_text = "Kubernetes", "pod", "kubectl", "Applied"

    def __init__(self, config: RunConfig, runs_dir: str, parent: QWidget | None,
                 engine_command: Callable[..., list[str]]) -> None:
        super().__init__(config, runs_dir, parent, engine_command)
        self.image, self.namespace, self.pvc = QLineEdit(DEFAULT_IMAGE), QLineEdit(), QLineEdit(DEFAULT_PVC)
        self.image.setToolTip("A container image with replica-studio installed; every worker runs it")
        self.namespace.setPlaceholderText("kubectl's current namespace")
        self.pvc.setToolTip("A ReadWriteMany PersistentVolumeClaim in the namespace: the run directory and its "
                            "checkpoints live there, and every worker reads them")
        self.cpus, self.memory = QLineEdit(), QLineEdit()
        self.cpus.setPlaceholderText("the namespace's default (a quantity: 4, 500m)")
        self.memory.setPlaceholderText("the namespace's default (a quantity: 8Gi)")
        self.gpus = QSpinBox(minimum=0, maximum=64)
        self.gpus.setSpecialValueText("none")
        self._add_form((("Image", self.image), ("Namespace", self.namespace), ("Runs volume (PVC)", self.pvc),
                        ("GPUs per worker", self.gpus), ("CPUs per worker", self.cpus),
                        ("Memory per worker", self.memory)),
                       f"kubectl applies it to the cluster of its current context. The run directory is on the "
                       f"volume; the run's record and its events as followed go into {runs_dir}.")

    def arguments(self, config_path: str) -> list[str]:
        """The ``submit`` command line the form says."""
        args = ["submit", config_path, "--kubernetes", "--runs-dir", self._runs_dir]
        for flag, field in (("--image", self.image), ("--namespace", self.namespace), ("--pvc", self.pvc),
                            ("--cpus", self.cpus), ("--memory", self.memory)):
            if field.text().strip():
                args += [flag, field.text().strip()]
        return [*args, "--gpus-per-pod", str(self.gpus.value())] if self.gpus.value() else args

    def _on_submitted(self, result: tuple[str, str]) -> None:
        self.submitted.emit(result[0], result[1])
        self.accept()
