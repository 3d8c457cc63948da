"""StrategyForm: how the work is distributed (``RunConfig.strategy``) and what that means
for the batch: replicas, per-replica batch, and a warning when it does not divide evenly.

The devices of a mirrored strategy are ticked in the DevicePanel; the ConfigPanel passes
them in with :meth:`set_devices`, and the replicas each worker of a multi-worker run will have
(its GPUs, else ``runtime.cpu_devices``) with :meth:`set_replicas_per_worker`, so this form
never reaches into another widget. The replicas counted are those the run will have: workers
x replicas per worker for multi-worker mirrored; one per worker for parameter servers, whose
steps each train one worker on the whole global batch.
"""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QSpinBox, QWidget

from gui_app.core.batch_split import batch_split, split_text
from gui_app.core.config import ALL_REDUCING, MULTI_WORKER, ConfigError, StrategyConfig
from gui_app.core.wording import count
from gui_app.ui.colors import WARNING_STYLE
from gui_app.ui.config.cluster_form import ClusterPanel
from gui_app.ui.config.form_base import FormSection, choice_box
from gui_app.ui.labels import ElidedComboBox

STRATEGY_LABELS = {
    "default": "Default (no distribution)",
    "one_device": "One device",
    "mirrored": "Mirrored (synchronous replicas)",
    "multi_worker_mirrored": "Multi-worker mirrored (several processes or machines)",
    "parameter_server": "Parameter servers (asynchronous workers)",
}
CROSS_DEVICE_LABELS = {
    None: "Automatic",
    "nccl": "NCCL all-reduce (GPUs)",
    "hierarchical_copy": "Hierarchical copy",
    "reduce_to_one": "Reduce to one device",
}
ALL_REDUCE_DTYPE_LABELS = {"float32": "float32 (exact)", "float16": "float16 (half the bytes, rounded)"}
ALL_REDUCE_DTYPE_TIP = ("The dtype the gradients are summed in across replicas: float16 casts each gradient down "
                        "before the all-reduce and back after it (half the bytes to move; gradients rounded to about "
                        "3 digits). Mirrored and multi-worker mirrored only. On CPUs the casts can cost more than "
                        "they save: measure it with Tools → Scaling benchmark → communication options.")
PACK_TIP = ("Multi-worker mirrored only: the gradients are all-reduced in packs of about this many bytes "
            "(CommunicationOptions.bytes_per_pack), so the first packs can travel while later gradients are still "
            "computed. 0: TensorFlow decides (one pack). MirroredStrategy's reductions ignore it.")


class StrategyForm(FormSection):
    section = "strategy"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = choice_box(STRATEGY_LABELS)
        self.add_field("strategy.name", self.name)
        self.device = ElidedComboBox()
        self.add_field("strategy.device", self.device, tip="The device of the one-device strategy")
        self.devices_label = QLabel()
        self.devices_label.setWordWrap(True)
        self.add_field("strategy.devices", self.devices_label,
                       tip="Tick devices in the Devices panel")
        self.cross_device_ops = choice_box(CROSS_DEVICE_LABELS)
        self.add_field("strategy.cross_device_ops", self.cross_device_ops,
                       tip="How gradients are summed across replicas")
        self.all_reduce_dtype = choice_box(ALL_REDUCE_DTYPE_LABELS)
        self.add_field("strategy.all_reduce_dtype", self.all_reduce_dtype, tip=ALL_REDUCE_DTYPE_TIP)
        # Up to the spin box's own limit, beyond the valid 1 GiB on purpose: the config says what is wrong.
        self.bytes_per_pack = QSpinBox(minimum=0, maximum=2**31 - 1, singleStep=64 << 10, suffix=" bytes")
        self.bytes_per_pack.setSpecialValueText("TensorFlow decides")
        self.add_field("strategy.bytes_per_pack", self.bytes_per_pack, tip=PACK_TIP)
        self.cluster = ClusterPanel(self._on_edited)
        self.form.addRow(self.cluster)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.form.addRow("Batch", self.summary)
        self.balance_warning = QLabel()
        self.balance_warning.setWordWrap(True)
        self.balance_warning.setStyleSheet(WARNING_STYLE)
        self.form.addRow(self.balance_warning)

        self._selected: list[str] = []
        self._available: list[str] = ["CPU:0"]
        self._gpus: list[str] = []
        self._global_batch = 64
        self._accumulation = 1
        self._per_worker = 1
        self._pending_device: str | None = None
        self.name.currentIndexChanged.connect(self._on_edited)
        self.device.currentIndexChanged.connect(self._on_edited)
        self.cross_device_ops.currentIndexChanged.connect(self._on_edited)
        self.all_reduce_dtype.currentIndexChanged.connect(self._on_edited)
        self.bytes_per_pack.valueChanged.connect(self._on_edited)
        self._fill_devices()
        self.set_config_section(StrategyConfig())

    # ---- inputs from the other panels ------------------------------------------------
    def set_devices(self, selected: list[str], available: list[str]) -> None:
        """Devices ticked in the DevicePanel, and every device there is (for one_device)."""
        self._selected = list(selected)
        self._available = list(available) or ["CPU:0"]
        self._gpus = [d for d in self._available if d.startswith("GPU")]
        self._fill_devices()
        self._on_edited()

    def set_global_batch(self, global_batch: int, accumulation: int = 1) -> None:
        """The training form's global batch and micro-batches per replica (the split rule asks both)."""
        self._global_batch, self._accumulation = global_batch, max(1, accumulation)
        self._update_summary()

    def _fill_devices(self) -> None:
        wanted = self._pending_device or self.device.currentData()
        self.device.blockSignals(True)
        self.device.clear()
        self.device.addItem("Automatic (GPU:0 if present, else CPU:0)", None)
        for name in self._available:
            self.device.addItem(name, name)
        if wanted is not None and self.device.findData(wanted) < 0:
            self.device.addItem(f"{wanted} (not detected)", wanted)
        self.device.setCurrentIndex(max(0, self.device.findData(wanted)))
        self.device.blockSignals(False)

    # ---- RunConfig section -----------------------------------------------------------
    def set_replicas_per_worker(self, count: int) -> None:
        """Replicas in each worker process of a cluster: its GPUs, else its logical CPUs
        (``runtime.cpu_devices`` applies to every worker)."""
        self._per_worker = max(1, count)
        self._update_summary()

    def replicas(self) -> int | None:
        """Replicas the run will have; None when a scheduler or TF_CONFIG decides the workers."""
        name = self.name.currentData()
        if name in MULTI_WORKER:
            values = self.cluster.values(name)
            workers = values["workers"] or (len(values["cluster"]) if isinstance(values["cluster"], tuple) else 0)
            if not workers:
                return None
            # Parameter-server workers each run one replica (their steps are scheduled one at a time).
            return workers * (self._per_worker if name == "multi_worker_mirrored" else 1)
        if name != "mirrored":
            return 1
        return len(self._selected) or max(1, len(self._gpus))

    def config_section(self) -> StrategyConfig:
        name = self.name.currentData()
        if name == "mirrored" and not self._selected:
            raise ConfigError("strategy.devices: tick at least one device in the Devices panel")
        return StrategyConfig(
            name=name,
            devices=tuple(self._selected) if name == "mirrored" else (),
            device=self.device.currentData() if name == "one_device" else None,
            cross_device_ops=self.cross_device_ops.currentData() if name == "mirrored" else None,
            all_reduce_dtype=self.all_reduce_dtype.currentData() if name in ALL_REDUCING else "float32",
            bytes_per_pack=self.bytes_per_pack.value() if name == "multi_worker_mirrored" else 0,
            **(self.cluster.values(name) if name in MULTI_WORKER else {}),
        )

    def set_config_section(self, section: StrategyConfig) -> None:
        self.blockSignals(True)
        try:
            self.name.setCurrentIndex(self.name.findData(section.name))
            self._pending_device = section.device
            self._fill_devices()
            self._pending_device = None
            self.cross_device_ops.setCurrentIndex(self.cross_device_ops.findData(section.cross_device_ops))
            self.all_reduce_dtype.setCurrentIndex(self.all_reduce_dtype.findData(section.all_reduce_dtype))
            self.bytes_per_pack.setValue(section.bytes_per_pack)
            self.cluster.set_values(section)
        finally:
            self.blockSignals(False)
        self._on_edited()

    # ---- display ---------------------------------------------------------------------
    def _on_edited(self, *_: object) -> None:
        name = self.name.currentData()
        self.device.setEnabled(name == "one_device")
        self.cross_device_ops.setEnabled(name == "mirrored")
        # Greyed, not hidden, where they do not apply, and the tooltip says where they do.
        self.all_reduce_dtype.setEnabled(name in ALL_REDUCING)
        self.bytes_per_pack.setEnabled(name == "multi_worker_mirrored")
        self.devices_label.setEnabled(name == "mirrored")
        self.cluster.setVisible(name in MULTI_WORKER)
        if name in MULTI_WORKER:
            self.cluster.refresh(name)
        if name == "mirrored":
            self.devices_label.setText(", ".join(self._selected) if self._selected else "none ticked")
        else:
            self.devices_label.setText("mirrored strategy only")
        self._update_summary()
        if not self.signalsBlocked():
            self.changed.emit()

    def _update_summary(self) -> None:
        name, replicas, batch = self.name.currentData(), self.replicas(), self._global_batch
        self.summary.setText(batch_summary(name, replicas, batch, self._per_worker))
        self.balance_warning.setText(uneven_warning(name, replicas, batch, self._per_worker, self._accumulation))
        self.balance_warning.setVisible(bool(self.balance_warning.text()))


def batch_summary(name: str, replicas: int | None, batch: int, per_worker: int = 1) -> str:
    """The form's "Batch" line: how many replicas the run will have and what each gets."""
    if replicas is None:
        return f"global batch {batch}, split over the replicas of the cluster the scheduler gives"
    if name == "parameter_server":  # each step is one worker's batch, applied on the servers
        return (f"{count(replicas, 'worker')}, asynchronous · each step: one worker trains on the global batch "
                f"of {batch}")
    where = f" ({replicas // per_worker} workers × {per_worker})" if name == "multi_worker_mirrored" else ""
    if batch % replicas and batch >= replicas:
        return f"{count(replicas, 'replica')}{where} · global batch {batch}: {split_text(batch, replicas)}"
    return f"{count(replicas, 'replica')}{where} · global batch {batch} · {batch // replicas} per replica"


def uneven_warning(name: str, replicas: int | None, batch: int, per_worker: int = 1, accumulation: int = 1) -> str:
    """The split rule's words for this form (core/batch_split.py, as train, worker and submit say
    them), its error too where only the workers would say it: a cluster's replicas are not in the
    config, so a batch smaller than them, or micro-batches that do not fit a replica's share, were
    said by nobody before the run failed. Elsewhere the error is the config's own (a mirrored
    strategy names its devices and asks the same rule; a global batch smaller than the
    micro-batches is the training section's): shown on its field, not twice."""
    if replicas is None:
        return ""
    workers = replicas // max(1, per_worker) if name == "multi_worker_mirrored" else 1
    split = batch_split(name, batch, replicas, workers, accumulation)
    if split.error and (name not in MULTI_WORKER or batch < accumulation):
        return ""
    return split.message
