"""What to try when one part of a training step dominates its time: the wait for input, or the
all-reduce (the parameter servers' updates) and the optimizer (the parts of ``Step.time_split``).
Worded once for the Training tab's input-bound line, the Replicas tab's step split and the
scaling report's recommendation, naming settings as the forms label them (gui_app.core.wording).
TensorFlow-free.
"""
from __future__ import annotations

from typing import Sequence

from gui_app.core import wording

SMALL_IMAGE_PIXELS = 64 * 64  # decoding images this small is cheap: smaller ones would not help


def input_advice(input_shape: Sequence[int] | None = None) -> str:
    """What to try when the replicas wait for input; smaller images only when they are not
    small already (8x8 digits were told to use smaller images)."""
    tips = [f"keep the decoded examples in memory ({wording.field('dataset.cache')})", "decode on more CPU cores",
            "convert the set to TFRecord shards (Tools → Prepare dataset, or replica-studio prepare)"]
    if input_shape and len(input_shape) >= 2 and input_shape[0] * input_shape[1] > SMALL_IMAGE_PIXELS:
        tips.insert(2, f"train on smaller images ({wording.field('dataset.image_size')})")
    return ", ".join(tips[:-1]) + ", or " + tips[-1]


INPUT_ADVICE = input_advice()  # where the images' size is not known
ALL_REDUCE_ADVICE = (f"try a larger global batch ({wording.field('training.accumulation_steps')} keeps its "
                     f"memory that of a micro-batch), the all-reduce in float16 "
                     f"({wording.field('strategy.all_reduce_dtype')}), NCCL on GPUs, or fewer replicas")
UPDATES_ADVICE = (f"try a larger global batch (fewer updates per example), more parameter servers "
                  f"({wording.field('strategy.ps')}), or fewer workers")


def bottleneck(compute: float, waited: float, rest: float, replicas: int, strategy: str | None = None,
               input_shape: Sequence[int] | None = None) -> str | None:
    """What to try when one part dominates the step, or None when nothing stands out. Under
    parameter servers the rest of a step is the worker's updates to the servers, not an all-reduce."""
    total = compute + waited + rest
    if total <= 0:
        return None
    if waited / total > 0.3:
        return f"input is {waited / total:.0%} of the step: {input_advice(input_shape)}"
    if replicas > 1 and rest / total > 0.4:
        advice = UPDATES_ADVICE if strategy == "parameter_server" else ALL_REDUCE_ADVICE
        return f"{wording.reduction(strategy)} and optimizer are {rest / total:.0%} of the step: {advice}"
    return None
