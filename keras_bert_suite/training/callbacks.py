"""Callbacks for long runs: a backup every N steps that resumes exactly, and TensorBoard logs.

A long run is cut into "epochs" of one checkpoint interval each (`checkpointed_fit_arguments`)
and backed up at every epoch end by `StepBackup`: weights, optimizer slots and the step counter
in one file whose name holds the epoch, written under a temporary name and renamed into place.
A process killed at any moment (SIGKILL included) leaves either the new backup or the previous
one, never weights that disagree with the recorded data position (Keras' `BackupAndRestore`
writes weights and its metadata as two files, so a kill between them desynchronises them).
`restore_backup` loads the latest one and says how many epochs it covers: the run continues
with `fit(initial_epoch=...)` and skips the batches those epochs consumed.

    directory/backup/   epoch-000012.weights.h5 (the latest) and the one before it
    directory/logs/     TensorBoard event files (losses, metrics, learning_rate)

`directory` may be any path tf.io.gfile reaches (gs://bucket/run; keras_bert_suite/storage.py):
Keras writes and reads the weights files there through a local temporary file.

Example (a toy model and data set; 6 steps backed up every 2; a rerun after a crash
starts after the last backup):
>>> import numpy as np, tensorflow as tf
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="adam", loss="mse")
>>> dataset = tf.data.Dataset.from_tensor_slices((np.ones((12, 3)), np.ones(12))).batch(2)
>>> fit_arguments = checkpointed_fit_arguments(num_train_steps=6,
...                                            checkpoint_every_n_steps=2)
>>> fit_arguments
{'epochs': 3, 'steps_per_epoch': 2}
>>> epoch = restore_backup(model, "runs/pretrain")  # 0 on a fresh run
>>> history = model.fit(
...     dataset.skip(epoch * fit_arguments["steps_per_epoch"]), initial_epoch=epoch,
...     callbacks=training_callbacks("runs/pretrain"), verbose=0, **fit_arguments)
>>> restore_backup(model, "runs/pretrain")  # a finished run removes its backups
0
"""

import contextlib
import os
import re

import keras

from keras_bert_suite import storage

BACKUP_DIR = "backup"
LOGS_DIR = "logs"
_BACKUP_FILE = re.compile(r"^epoch-(\d+)\.weights\.h5$")


def checkpointed_fit_arguments(num_train_steps, checkpoint_every_n_steps,
                               gradient_accumulation_steps=None):
    """`fit()`'s `epochs` and `steps_per_epoch` for one epoch per checkpoint interval.

    Steps count optimizer updates; with gradient accumulation an epoch is
    `checkpoint_every_n_steps * gradient_accumulation_steps` batches, so a backup never
    falls between the micro-batches of one update.
    """
    if num_train_steps % checkpoint_every_n_steps:
        raise ValueError(
            f"checkpoint_every_n_steps ({checkpoint_every_n_steps}) must divide "
            f"num_train_steps ({num_train_steps}) so that the last step is backed up.")
    batches_per_step = gradient_accumulation_steps or 1
    return {"epochs": num_train_steps // checkpoint_every_n_steps,
            "steps_per_epoch": checkpoint_every_n_steps * batches_per_step}


def _backups(directory):
    """[(epoch, path)] of the complete backups under `directory`, latest first."""
    backup_dir = os.path.join(directory, BACKUP_DIR)
    if not storage.isdir(backup_dir):
        return []
    found = [(int(match.group(1)), os.path.join(backup_dir, name))
             for name in storage.listdir(backup_dir) if (match := _BACKUP_FILE.match(name))]
    return sorted(found, reverse=True)


class StepBackup(keras.callbacks.Callback):
    """Backs the training state up into `directory/backup/` at every epoch end (atomically:
    written to `backup/.partial/`, then renamed), keeping the latest `keep` backups.

    `write=False` on the non-chief workers of a multi-worker run: they train in lockstep
    with the chief and resume from its backup. The backups are deleted once `fit` completes.
    """

    def __init__(self, directory, write=True, keep=2):
        super().__init__()
        self.directory = directory
        self.write = write
        self.keep = keep

    def on_epoch_end(self, epoch, logs=None):
        if not self.write:
            return
        backup_dir = os.path.join(self.directory, BACKUP_DIR)
        partial_dir = os.path.join(backup_dir, ".partial")
        storage.makedirs(partial_dir)
        name = f"epoch-{epoch + 1:06d}.weights.h5"
        with _undistributed():
            self.model.save_weights(os.path.join(partial_dir, name), overwrite=True)
        storage.replace(os.path.join(partial_dir, name), os.path.join(backup_dir, name))
        for _, old in _backups(self.directory)[self.keep:]:
            storage.remove(old)

    def on_train_end(self, logs=None):
        if self.write:
            storage.rmtree(os.path.join(self.directory, BACKUP_DIR))


@contextlib.contextmanager
def _undistributed():
    """No keras.distribution while the chief alone saves: Keras' save creates a scratch
    optimizer (saving_lib.get_attr_skipset), and under a distribution over several JAX
    processes creating a variable is a collective (jax.device_put checks that every process
    passes the same value), which would wait for processes that are not saving."""
    if keras.backend.backend() != "jax" or keras.distribution.distribution() is None:
        yield
        return
    current = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(current)


def restore_backup(model, directory):
    """Loads the latest backup under `directory` into the compiled `model` (weights,
    optimizer slots and step counter); returns the epochs it covers (0: nothing to resume).

    Call it in the distribution's scope, before `fit(initial_epoch=...)`. If the latest file
    cannot be read (a damaged disk), the one before it is used.
    """
    backups = _backups(directory)
    if not backups:
        return 0
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)  # slots must exist to be loaded
    for epoch, path in backups[:-1]:
        try:
            model.load_weights(path)
            return epoch
        except OSError:
            continue  # try the one before
    epoch, path = backups[-1]
    model.load_weights(path)  # the oldest: its error, if any, is the one to report
    return epoch


def training_callbacks(directory, log_every_n_steps=100, tensorboard=True, chief=True,
                       backup=True):
    """[StepBackup, TensorBoard] writing under `directory`; the non-chief workers of a
    multi-worker run (`chief=False`) get a backup that writes nothing and no TensorBoard."""
    callbacks = [StepBackup(directory, write=chief)] if backup else []
    if tensorboard and chief:
        callbacks.append(keras.callbacks.TensorBoard(
            os.path.join(directory, LOGS_DIR), update_freq=log_every_n_steps))
    return callbacks
