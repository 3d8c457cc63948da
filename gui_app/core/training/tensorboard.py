"""TensorBoard scalar summaries without the ``tensorboard`` package.

TensorFlow 2.21 no longer depends on TensorBoard, and ``tf.summary.scalar`` raises
``TBNotInstalledError`` without it. The low-level ``tf.summary.write`` with the scalars
plugin's metadata writes exactly what ``tf.summary.scalar`` would, so the event files open in
TensorBoard (installed separately by whoever wants to look) while the app does not carry it.
"""
from __future__ import annotations

from pathlib import Path


class ScalarWriter:
    def __init__(self, logdir: str | Path):
        import tensorflow as tf
        from tensorflow.core.framework import summary_pb2

        self._tf = tf
        self._writer = tf.summary.create_file_writer(str(logdir))
        self._metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")).SerializeToString()

    def scalars(self, step: int, values: dict[str, float]) -> None:
        tf = self._tf
        with self._writer.as_default(step=step):
            for tag, value in values.items():
                tf.summary.write(tag, tf.constant(value, tf.float32), metadata=self._metadata)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
