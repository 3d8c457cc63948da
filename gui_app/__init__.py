"""Replica Studio: distributed TensorFlow training and evaluation that shows every replica live."""

__version__ = "0.1.0"
