"""After the NaN guard trips: replay the run from its last good checkpoint on one device to name
the first layer that went non-finite and the examples of the offending batch whose loss alone is
non-finite (docs/diagnose.md, "non_finite").

Nothing runs on a healthy run: a :class:`Replayer` holds references only, and does its work in
:meth:`Replayer.explain`, which the guard (and the checkpoints' weight check) call once, after
the trip, in the process that writes the run's events (a cluster's chief; the other workers wait
for it, so that their exit does not end the chief's replay: the launcher stops every worker when
one fails).

The replay rebuilds the model and its optimizer outside any strategy (the run's model is left as
it failed), restores the last good checkpoint into them (or, with no checkpoint, rebuilds the
initial weights from ``training.seed``), and runs the steps from there to the offending one on
the same examples: global step s of an epoch trains on a slice of that epoch's seeded order
(engine/training/pipeline.py), each replica on its part of it. Each step does what a replica step
does (the loss of its part over the global batch, its gradients, the sum over the replicas in the
all-reduce's dtype, the optimizer's update) and looks, in this order, at the loss, the local
gradients, the summed gradients and the weights. At the first step where one is not finite it
names the first variable in model order that is (for a loss gone first: the first layer whose
output is), and the examples whose loss alone (the model in inference mode, one example at a
time in effect) is not finite on the weights that step started from.

What cannot be replayed is said, not guessed (:func:`refusal`): streamed input (its shuffle
buffer over files is not recomputed here), parameter servers (each worker reads its own
unseeded order), mixed precision (the loss scale skips non-finite gradients on purpose), no
checkpoint and no seed (the initial weights are gone), or a checkpoint too far back.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from gui_app.core.messages import first_line
from gui_app.engine.training.context import ModelState, RunContext

MAX_STEPS = 200  # the most steps replayed from the last good checkpoint
MAX_SECONDS = 60.0  # the replay gives up after this long (the run's error waits for it)
MAX_EXAMPLES = 10  # the examples named


@dataclass
class Replay:
    """What the replay found: the ``non_finite`` event's replay fields."""

    replayed: bool
    note: str | None = None
    step: int | None = None
    layer: str | None = None
    part: str | None = None  # activations | gradients | all_reduced_gradients | weights
    examples: list[int] | None = None
    examples_count: int | None = None
    seconds: float | None = None

    def fields(self) -> dict[str, Any]:
        return {"replayed": self.replayed, "replay_note": self.note, "replay_step": self.step, "layer": self.layer,
                "layer_part": self.part, "examples": self.examples, "examples_count": self.examples_count,
                "replay_seconds": None if self.seconds is None else round(self.seconds, 2)}


def checkpoint_step(path: str | None) -> int:
    """The step of a checkpoint's path prefix (``.../ckpt-40`` -> 40); 0 for none."""
    tail = path.rsplit("-", 1)[-1] if path else ""
    return int(tail) if tail.isdigit() else 0


def refusal(ctx: RunContext, checkpoint: str | None, step: int, max_steps: int = MAX_STEPS) -> str | None:
    """Why the steps up to ``step`` cannot be replayed from ``checkpoint``; None when they can."""
    cfg = ctx.config.training
    if cfg.mixed_precision:
        return ("mixed precision: its loss scale skips non-finite gradients on purpose, and the replay runs "
                "in float32")
    if ctx.built.coordinator is not None:
        return "parameter servers: each worker reads its own unseeded order, so the batch is not known"
    if not hasattr(ctx.input, "train_batch"):
        return ("streamed input: its order (a seeded shuffle buffer over the files) is not recomputed here; "
                "dataset.loading 'memory' keeps it replayable")
    if checkpoint is None and cfg.seed is None and ctx.config.model.name != "keras_file":  # a file has its weights
        return "no checkpoint was written and training.seed is null: the initial weights cannot be rebuilt"
    start = checkpoint_step(checkpoint)
    if step - start > max_steps:
        where = f"the last good checkpoint (step {start})" if checkpoint else "the start"
        return f"{where} is {step - start} steps before it, more than the replay's bound of {max_steps}"
    return None


@dataclass
class _Found:
    step: int  # 1-based
    part: str
    index: int | None = None  # into the trainable variables
    losses_bad: list[int] = field(default_factory=list)  # replicas whose loss went non-finite


class Replayer:
    """Holds what a replay needs; replays only when asked (:meth:`explain`). ``chief``: this
    process writes the run's events; another worker of a cluster only waits for the chief's."""

    def __init__(self, ctx: RunContext, state: ModelState, chief: bool = True, max_steps: int | None = None,
                 max_seconds: float | None = None):
        self.ctx, self.state, self.chief = ctx, state, chief
        self.max_steps = MAX_STEPS if max_steps is None else max_steps
        self.max_seconds = MAX_SECONDS if max_seconds is None else max_seconds

    def explain(self, step: int) -> Replay:
        """Replay up to (1-based) ``step``, the offending one; never raises (the run's error follows)."""
        if not self.chief:
            # The chief replays; leaving now would make the launcher stop it (every worker is stopped
            # when one fails). It ends this worker when its replay is done.
            time.sleep(self.max_seconds + 30)
            return Replay(False, "the chief replays")
        started = time.perf_counter()
        checkpoint = self.state.kept_checkpoint_path()
        why = refusal(self.ctx, checkpoint, step, self.max_steps)
        if why is not None:
            return Replay(False, why)
        try:
            found = self._replay(checkpoint, step, started)
        except Exception as exc:  # noqa: BLE001 - the evidence is extra: the run's own error must still come
            found = Replay(False, f"it failed: {first_line(exc, 200)}")
        found.seconds = time.perf_counter() - started
        return found

    # ---- the replay -----------------------------------------------------------------------------
    def _replay(self, checkpoint: str | None, step: int, started: float) -> Replay:
        model, optimizer = self._rebuild(checkpoint)
        start = checkpoint_step(checkpoint)
        names = [v.path for v in self.state.model.trainable_variables]  # the run's names (a rebuilt model's differ)
        spe, seed = self.ctx.steps_per_epoch, self.ctx.data_seed
        for s in range(start, step):
            if time.perf_counter() - started > self.max_seconds:
                return Replay(False, f"it gave up after {self.max_seconds:g} s, at step {s + 1} of the {step - start} "
                                     f"steps from {'step ' + str(start) if checkpoint else 'the start'}")
            x, y, rows = cast(Any, self.ctx.input).train_batch(*divmod(s, spe), seed)  # refusal() checked it
            found = self._step(model, optimizer, x, y, s + 1)
            if found is None:
                continue
            layer = names[found.index] if found.index is not None else None
            part: str | None = found.part
            if found.part == "loss":
                layer = self._first_layer_out(model, x, found.losses_bad)
                part = "activations" if layer is not None else None  # None: the loss itself overflowed
            # After an update that overflowed, the weights the step started from are gone; every loss of
            # the step was finite there.
            bad = rows[:0] if found.part == "weights" else self._examples(model, x, y, rows)
            early = f"found at step {s + 1}, before the step whose loss tripped the guard, {step}"
            return Replay(True, None if s + 1 == step else early, s + 1, layer, part,
                          [int(i) for i in bad[:MAX_EXAMPLES]], len(bad))
        return Replay(False, f"on one device from {'step ' + str(start) if checkpoint else 'the start'} every value "
                             f"stayed finite through step {step}, as one device rounds differently from the run's "
                             f"replicas")

    def _rebuild(self, checkpoint: str | None):
        """A single-device model and optimizer at the last good checkpoint (or the seeded start)."""
        import keras
        import tensorflow as tf

        from gui_app.engine.training.models import build_model
        from gui_app.engine.training.optim import build_optimizer, make_schedule

        cfg, source = self.ctx.config, self.ctx.input
        stats = source.normalization_stats()
        if checkpoint is None and cfg.training.seed is not None:  # build_model_state's draws: its initial weights
            keras.utils.set_random_seed(cfg.training.seed)
        # No strategy scope (the guard runs outside the run's): plain variables on this process's first device.
        model = build_model(cfg.model, source.input_shape, source.num_classes, False, stats)
        optimizer = build_optimizer(cfg.training, make_schedule(cfg.training, self.ctx.steps_per_epoch,
                                                                self.ctx.total_steps))
        optimizer.build(model.trainable_variables)
        if checkpoint is not None:
            step = tf.Variable(0, dtype=tf.int64, trainable=False)
            seed = tf.Variable(0, dtype=tf.int64, trainable=False)
            tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, data_seed=seed) \
                .restore(checkpoint).assert_consumed()
        return model, optimizer

    def _step(self, model, optimizer, x: np.ndarray, y: np.ndarray, step: int) -> _Found | None:
        """One training step as the replicas run it; what went non-finite first, or None."""
        import keras
        import tensorflow as tf

        from gui_app.engine.training.models import outputs_logits
        from gui_app.engine.training.pipeline import replica_parts

        cfg, built = self.ctx.config, self.ctx.built
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=outputs_logits(model), reduction=None)
        variables = model.trainable_variables
        global_batch, replicas = len(y), len(built.replica_workers) or 1
        local_grads, losses_bad = [], []
        for r, part in enumerate(replica_parts(np.arange(len(y)), built.replica_workers or [0])):
            n = len(part)
            m = max(1, min(cfg.training.accumulation_steps, n))
            total: list[Any] = [None] * len(variables)
            for i in range(m):  # the micro-batches of gradient accumulation (engine/training/loop.py)
                micro = part[i * n // m:(i + 1) * n // m]
                with tf.GradientTape() as tape:
                    logits = model(_unit(x[micro]), training=True)
                    per_example = loss_fn(y[micro], logits)
                    loss = tf.reduce_sum(per_example) / global_batch
                    if model.losses:
                        loss += tf.add_n(model.losses) / (replicas * m)
                grads = tape.gradient(loss, variables)
                if not np.isfinite(per_example.numpy()).all():
                    losses_bad.append(r)
                total = [g if t is None else (t if g is None else t + tf.convert_to_tensor(g))
                         for t, g in zip(total, grads)]
            local_grads.append(total)
        if losses_bad:
            return _Found(step, "loss", losses_bad=sorted(set(losses_bad)))
        bad = _first_non_finite([[grads[j] for grads in local_grads] for j in range(len(variables))])
        if bad is not None:
            return _Found(step, "gradients", bad)
        reduced = _sum(local_grads, self.ctx.config.strategy.all_reduce_dtype)
        bad = _first_non_finite([[g] for g in reduced])
        if bad is not None:
            return _Found(step, "all_reduced_gradients", bad)
        optimizer.apply_gradients([(g, v) for g, v in zip(reduced, variables) if g is not None])
        bad = _first_non_finite([[v] for v in variables])
        return _Found(step, "weights", bad) if bad is not None else None

    def _first_layer_out(self, model, x: np.ndarray, replicas: list[int]) -> str | None:
        """The first layer (model order) whose output is non-finite on the part of the first
        replica whose loss was; the run's name for it. None when every output is finite."""
        import keras

        from gui_app.engine.training.pipeline import replica_parts

        layers = [(i, layer) for i, layer in enumerate(model.layers) if not isinstance(layer, keras.layers.InputLayer)]
        try:
            probe = keras.Model(model.inputs, [layer.output for _, layer in layers])
        except Exception:  # noqa: BLE001 - a model whose layers have no single output (nested, shared)
            return None
        part = replica_parts(np.arange(len(x)), self.ctx.built.replica_workers or [0])[replicas[0]]
        outputs = probe(_unit(x[part]), training=True)
        for (i, _), out in zip(layers, outputs if isinstance(outputs, (list, tuple)) else [outputs]):
            if not np.isfinite(np.asarray(out)).all():
                return self.state.model.layers[i].name
        return None

    def _examples(self, model, x: np.ndarray, y: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The dataset indices of the batch's examples whose loss alone is non-finite: the model in
        inference mode, where no example's result depends on the others (batch statistics)."""
        import keras

        from gui_app.engine.training.models import outputs_logits
        from gui_app.engine.training.pipeline import replica_parts

        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=outputs_logits(model), reduction=None)
        finite = np.ones(len(y), bool)
        for part in replica_parts(np.arange(len(y)), self.ctx.built.replica_workers or [0]):  # a replica's memory
            finite[part] = np.isfinite(np.asarray(loss_fn(y[part], model(_unit(x[part]), training=False))))
        return rows[~finite]


def _unit(x: np.ndarray):
    """Images as the replica step takes them (uint8 -> [0, 1] float32)."""
    import tensorflow as tf

    from gui_app.engine.training.pipeline import to_unit_range

    return to_unit_range(tf.constant(x))


def _first_non_finite(values: list[list[Any]]) -> int | None:
    """The first index whose values (tensors, IndexedSlices or None) hold a NaN or an infinity."""
    for j, group in enumerate(values):
        for v in group:
            if v is None:
                continue
            data = getattr(v, "values", v)  # IndexedSlices: its values
            if not np.isfinite(np.asarray(data)).all():
                return j
    return None


def _sum(local_grads: list[list[Any]], dtype: str) -> list[Any]:
    """The replicas' gradients summed as the all-reduce sums them: in ``dtype``, back after."""
    import tensorflow as tf

    out: list[Any] = []
    for grads in zip(*local_grads):
        present = [tf.convert_to_tensor(g) for g in grads if g is not None]
        if not present:
            out.append(None)
            continue
        if dtype == "float32":
            out.append(tf.add_n(present))
        else:
            out.append(tf.cast(tf.add_n([tf.cast(g, dtype) for g in present]), present[0].dtype))
    return out
