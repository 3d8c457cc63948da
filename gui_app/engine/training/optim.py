"""Optimizers and learning-rate schedules from the training config."""
from __future__ import annotations

from gui_app.core.config import TrainingConfig


def make_schedule(cfg: TrainingConfig, steps_per_epoch: int, total_steps: int):
    """A Keras LearningRateSchedule: linear warm-up (optional), then constant, cosine or step decay."""
    import keras

    class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
        # Defined in here so that keras is imported only when a run starts.
        def __init__(self, base_lr, kind, warmup_steps, decay_steps, step_every, step_rate):
            self.base_lr, self.kind = float(base_lr), kind
            self.warmup_steps, self.decay_steps = int(warmup_steps), int(decay_steps)
            self.step_every, self.step_rate = int(step_every), float(step_rate)

        def __call__(self, step):
            ops = keras.ops
            step = ops.cast(step, "float32")
            after = ops.maximum(step - self.warmup_steps, 0.0)
            if self.kind == "cosine":
                progress = ops.minimum(after / max(self.decay_steps, 1), 1.0)
                lr = self.base_lr * 0.5 * (1.0 + ops.cos(3.141592653589793 * progress))
            elif self.kind == "step":
                lr = self.base_lr * ops.power(self.step_rate, ops.floor(after / self.step_every))
            else:
                lr = ops.convert_to_tensor(self.base_lr, "float32")
            if self.warmup_steps > 0:
                warm = self.base_lr * ops.minimum((step + 1.0) / self.warmup_steps, 1.0)
                lr = ops.where(step < self.warmup_steps, warm, lr)
            return lr

        def get_config(self):
            return {"base_lr": self.base_lr, "kind": self.kind, "warmup_steps": self.warmup_steps,
                    "decay_steps": self.decay_steps, "step_every": self.step_every, "step_rate": self.step_rate}

    return WarmupSchedule(cfg.learning_rate, cfg.schedule, cfg.warmup_steps,
                          max(total_steps - cfg.warmup_steps, 1), cfg.step_decay_epochs * steps_per_epoch,
                          cfg.step_decay_rate)


def build_optimizer(cfg: TrainingConfig, lr):
    """Create the optimizer with schedule ``lr`` (call inside ``strategy.scope()``; the Trainer
    builds it before the first step)."""
    import keras

    opt = keras.optimizers
    if cfg.optimizer == "sgd":
        optimizer = opt.SGD(lr)
    elif cfg.optimizer == "momentum":
        optimizer = opt.SGD(lr, momentum=cfg.momentum, nesterov=True)
    elif cfg.optimizer == "adam":
        optimizer = opt.Adam(lr)
    elif cfg.optimizer == "adamw":
        optimizer = opt.AdamW(lr, weight_decay=cfg.weight_decay)
    else:
        optimizer = opt.RMSprop(lr)
    if cfg.mixed_precision:
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer
