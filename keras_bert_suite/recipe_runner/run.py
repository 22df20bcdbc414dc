"""One training run: what every recipe kind (fine-tuning, pretraining, distillation) shares.

    run = TrainingRun(recipe, output_dir, log)      # devices, global batch, seed, recipe.json
    with run.building():                            # precision policy + distribution scope
        model = ...
        run.compile(model, optimizer)               # loss-scaled, the recipe's step settings
        initial_epoch = run.resume(model)           # pretraining: the latest backup, if any
    run.fit(model, data, epochs=..., steps_per_epoch=..., backup=...)
    run.save(model, "model.keras")                  # the chief writes; other workers do not

A recipe kind's own module reads its data and builds its model; the run owns where it
trains, in which precision, and what it writes. Under a multi-worker distribution every
worker runs the same code with the same output directory: only the chief writes to it.
"""

import contextlib
import os

from keras_bert_suite import storage
from keras_bert_suite.storage import write_json
from keras_bert_suite.tasks.recipe_contract import RecipeError
from keras_bert_suite.distribution import start_distribution
from keras_bert_suite.training.cpu_bf16 import cpu_precision
from keras_bert_suite.training import (
    loss_scaled, restore_backup, set_mixed_precision, training_callbacks)


def _cpu_only():
    """Whether this process trains on the CPU alone (no GPU or TPU in sight)."""
    import keras

    if keras.backend.backend() == "torch":  # keras.distribution has no torch devices
        import torch

        return not torch.cuda.is_available()
    return all(device.lower().startswith("cpu") for device in keras.distribution.list_devices())


class TrainingRun:
    """`recipe`: a loaded recipe (its `distribution` and `training` sections); `output_dir`:
    any path tf.io.gfile reaches (gs://bucket/run)."""

    def __init__(self, recipe, output_dir, log=print):
        import keras

        if recipe["training"]["jit_compile"] not in ("auto", True, False):
            raise RecipeError(f"training.jit_compile must be \"auto\", true or false, got "
                              f"{recipe['training']['jit_compile']!r}.")
        self.distribution, self.batch_size, self.precision = start_distribution(recipe, log)
        if recipe["training"]["precision"] == "auto" and _cpu_only():
            self.precision, why = cpu_precision(keras.backend.backend())
            log(f"Precision: {why}")
        self.output_dir = output_dir
        self.training = recipe["training"]
        self.log = log
        if self.chief:
            storage.makedirs(output_dir)
            write_json(os.path.join(output_dir, "recipe.json"), recipe)
        keras.utils.set_random_seed(self.training["seed"])

    @property
    def chief(self):
        return self.distribution.is_chief

    def path(self, name):
        return os.path.join(self.output_dir, name)

    @contextlib.contextmanager
    def building(self):
        """Models, optimizers and restored state made inside are in the run's precision
        policy and distribution scope; Keras' global policy is restored after."""
        import keras

        previous_policy = keras.config.dtype_policy()
        set_mixed_precision(self.precision)
        try:
            with self.distribution.scope():
                yield
        finally:
            keras.config.set_dtype_policy(previous_policy)

    def compile(self, model, optimizer, **compile_arguments):
        """`model.compile` with the optimizer loss-scaled for float16 and the recipe's
        `jit_compile`, `run_eagerly` and the distribution's `steps_per_execution`."""
        model.compile(optimizer=loss_scaled(optimizer), jit_compile=self.training["jit_compile"],
                      run_eagerly=self.training["run_eagerly"],
                      steps_per_execution=self.distribution.steps_per_execution,
                      **compile_arguments)

    def resume(self, model):
        """The epochs the latest backup in the output directory covers (0: a fresh run);
        its weights, optimizer slots and step counter are loaded into `model`."""
        return restore_backup(model, self.output_dir)

    def fit(self, model, data, backup=False, log_every_n_steps=100, callbacks=(),
            **fit_arguments):
        """`model.fit` in the distribution's run scope with the run's callbacks: a backup
        every epoch when `backup` (resumable), TensorBoard logs, both written by the chief
        only; `callbacks` run after them."""
        run_callbacks = training_callbacks(self.output_dir, log_every_n_steps, chief=self.chief,
                                           backup=backup)
        with self.distribution.run_scope():
            return model.fit(data, shuffle=False, callbacks=[*run_callbacks, *callbacks],
                             **fit_arguments)

    def evaluate(self, model, data, **arguments):
        with self.distribution.run_scope():
            return model.evaluate(data, **arguments)

    def save(self, model, name):
        """Saves `model` as `name` in the output directory (chief only); returns the path."""
        path = self.path(name)
        if self.chief:
            model.save(path)
        return path
