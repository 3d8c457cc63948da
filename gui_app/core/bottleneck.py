"""What to try when one part of a training step dominates its time: the wait for input, or the
all-reduce and the optimizer (the parts of ``Step.time_split``). Worded once for the Training
tab's input-bound line, the Replicas tab's step split and the scaling report's recommendation.
TensorFlow-free.
"""
from __future__ import annotations

INPUT_ADVICE = ("cache the dataset (dataset.cache), decode in parallel (more CPU cores), use smaller images, "
                "or Tools → Prepare dataset to stream TFRecord shards")
ALL_REDUCE_ADVICE = ("try a larger global batch (training.accumulation_steps keeps its memory that of a "
                     "micro-batch), all-reduce in float16, NCCL on GPUs, or fewer replicas")


def bottleneck(compute: float, waited: float, rest: float, replicas: int) -> str | None:
    """What to try when one part dominates the step, or None when nothing stands out."""
    total = compute + waited + rest
    if total <= 0:
        return None
    if waited / total > 0.3:
        return f"input is {waited / total:.0%} of the step: {INPUT_ADVICE}"
    if replicas > 1 and rest / total > 0.4:
        return f"all-reduce and optimizer are {rest / total:.0%} of the step: {ALL_REDUCE_ADVICE}"
    return None
