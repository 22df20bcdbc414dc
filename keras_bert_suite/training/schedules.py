"""Learning-rate schedules BERT trains with, as serializable Keras schedules."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak_learning_rate`, then polynomial (power 1: linear) decay.

    Exactly google-research/bert's `optimization.py` (and Model Garden's `WarmUp` over
    `PolynomialDecay`):

        step < warmup_steps:  peak · step / warmup_steps
        otherwise:            (peak - end) · (1 - min(step, total_steps) / total_steps)^power + end

    The decay runs over all `total_steps` from step 0, so right after warm-up the rate is
    already peak · (1 - warmup_steps / total_steps); Hugging Face's linear schedule instead
    starts its decay at the end of warm-up. `total_steps=None` keeps the peak after warm-up.
    """

    def __init__(self, peak_learning_rate, total_steps=None, warmup_steps=0,
                 end_learning_rate=0.0, power=1.0):
        if total_steps is not None and warmup_steps > total_steps:
            raise ValueError(
                f"warmup_steps ({warmup_steps}) must not exceed total_steps ({total_steps}).")
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.end_learning_rate = end_learning_rate
        self.power = power

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak = ops.cast(self.peak_learning_rate, "float32")
        if self.total_steps:
            progress = ops.minimum(step, self.total_steps) / self.total_steps
            decayed = ((peak - self.end_learning_rate) * (1.0 - progress) ** self.power
                       + self.end_learning_rate)
        else:
            decayed = peak
        if not self.warmup_steps:
            return decayed
        warming_up = peak * step / self.warmup_steps
        return ops.where(step < self.warmup_steps, warming_up, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
        }


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class PerUpdateSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Evaluates `schedule` at the number of optimizer updates, not of micro-batches.

    With `gradient_accumulation_steps=N` a Keras optimizer calls its schedule with the
    micro-batch counter; dividing by N keeps warm-up and decay lengths in update steps, so
    N accumulated micro-batches get the learning rate one large batch would have had.
    """

    def __init__(self, schedule, gradient_accumulation_steps):
        self.schedule = schedule
        self.gradient_accumulation_steps = gradient_accumulation_steps

    def __call__(self, step):
        return self.schedule(ops.floor_divide(step, self.gradient_accumulation_steps))

    def get_config(self):
        return {
            "schedule": keras.optimizers.schedules.serialize(self.schedule),
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["schedule"] = keras.optimizers.schedules.deserialize(config["schedule"])
        return cls(**config)
