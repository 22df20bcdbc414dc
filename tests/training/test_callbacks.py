"""An interrupted run resumes from its last backup with the same step counter, optimizer
state and data position, and ends with the weights of an uninterrupted run."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.training import (
    checkpointed_fit_arguments,
    create_optimizer,
    restore_backup,
    training_callbacks,
)
from tests.conftest import to_numpy
from tests.tiny_pretraining import RUN_EAGERLY, pretraining_batch, tiny_pretrainer

# 6 updates, a backup every 2: "epochs" of 2 steps each.
FIT_ARGUMENTS = checkpointed_fit_arguments(num_train_steps=6, checkpoint_every_n_steps=2)


class Interrupt(keras.callbacks.Callback):
    def __init__(self, at_step):
        super().__init__()
        self.at_step = at_step

    def on_train_batch_end(self, batch, logs=None):
        if _step(self.model) == self.at_step:
            raise RuntimeError("interrupted")


class StepAtStart(keras.callbacks.Callback):
    """Records the optimizer's step counter when fit starts."""

    def on_train_begin(self, logs=None):
        self.step = _step(self.model)


def _step(model):
    return int(to_numpy(model.optimizer.iterations))


def _dataset(skip=0):
    x, y = pretraining_batch(batch=12)  # 6 different batches of 2, one per step
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(2).repeat().skip(skip)


def _restart(pretrainer, weights):
    """The state of a fresh process: given weights, a zeroed optimizer (step 0).

    One model object serves all three runs, so its train function compiles once.
    """
    pretrainer.set_weights(weights)
    for variable in pretrainer.optimizer.variables:
        variable.assign(keras.ops.zeros_like(variable.value))


def test_resume_continues_the_interrupted_run(tmp_path):
    pretrainer = tiny_pretrainer(num_layers=1)
    pretrainer.compile(optimizer=create_optimizer(learning_rate=1e-2, num_train_steps=6),
                       run_eagerly=RUN_EAGERLY)
    pretrainer.optimizer.build(pretrainer.trainable_variables)
    initial = pretrainer.get_weights()
    pretrainer.fit(_dataset(), verbose=0, shuffle=False, **FIT_ARGUMENTS)
    assert _step(pretrainer) == 6
    expected_weights = pretrainer.get_weights()
    expected_optimizer = [to_numpy(v) for v in pretrainer.optimizer.variables]

    run_dir = str(tmp_path / "run")
    _restart(pretrainer, initial)
    with pytest.raises(RuntimeError, match="interrupted"):
        pretrainer.fit(_dataset(), verbose=0, shuffle=False, **FIT_ARGUMENTS,
                       # Step 5 is the first step of the third "epoch".
                       callbacks=training_callbacks(run_dir) + [Interrupt(at_step=5)])
    assert sorted(os.listdir(os.path.join(run_dir, "backup"))) == [
        ".partial", "epoch-000001.weights.h5", "epoch-000002.weights.h5"]

    _restart(pretrainer, tiny_pretrainer(num_layers=1).get_weights())  # other weights
    epoch = restore_backup(pretrainer, run_dir)
    assert epoch == 2  # the backup after step 4; step 5 is redone
    step_at_start = StepAtStart()
    history = pretrainer.fit(_dataset(epoch * FIT_ARGUMENTS["steps_per_epoch"]), verbose=0,
                             shuffle=False, initial_epoch=epoch, **FIT_ARGUMENTS,
                             callbacks=training_callbacks(run_dir) + [step_at_start])
    assert step_at_start.step == 4
    assert len(history.history["loss"]) == 1  # only the third epoch was left
    assert _step(pretrainer) == 6
    for expected, actual in zip(expected_weights, pretrainer.get_weights()):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    for expected, actual in zip(expected_optimizer, pretrainer.optimizer.variables):
        np.testing.assert_allclose(to_numpy(actual), expected, rtol=1e-5, atol=1e-7)

    assert not os.path.exists(os.path.join(run_dir, "backup"))  # removed once fit completes
    assert any(files for _, _, files in os.walk(os.path.join(run_dir, "logs")))
    assert restore_backup(pretrainer, run_dir) == 0


def test_checkpoint_interval_must_divide_the_run():
    assert checkpointed_fit_arguments(100, 25, gradient_accumulation_steps=4) == {
        "epochs": 4, "steps_per_epoch": 100}
    with pytest.raises(ValueError, match="divide"):
        checkpointed_fit_arguments(100, 30)
