"""Callbacks for long runs: a backup every N steps that resumes exactly, and TensorBoard logs.

Keras' `BackupAndRestore` restores weights, optimizer state (slots and the `iterations`
step counter) and the epoch to resume at, but a run resumed mid-epoch would restart that
epoch from its first batch. So a long run is cut into "epochs" of one checkpoint interval
each (`checkpointed_fit_arguments`) and backed up at every epoch end: a resumed run starts
exactly where the last backup was taken, and `completed_batches` tells the input pipeline
how many batches to skip to be at the same data position.

    directory/backup/   Keras' backup (latest.weights.h5, training_metadata.json, .bkp copies)
    directory/logs/     TensorBoard event files (losses, metrics, learning_rate)

Example:
>>> fit_arguments = checkpointed_fit_arguments(num_train_steps=10_000,
...                                            checkpoint_every_n_steps=1_000)
>>> skip = completed_batches("runs/pretrain", fit_arguments["steps_per_epoch"])
>>> model.fit(dataset.skip(skip), callbacks=training_callbacks("runs/pretrain"),
...           verbose=1, **fit_arguments)  # verbose=1: Keras' progress bar
"""

import json
import os

import keras

BACKUP_DIR = "backup"
LOGS_DIR = "logs"


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


def training_callbacks(directory, log_every_n_steps=100, tensorboard=True):
    """[BackupAndRestore at every epoch end, TensorBoard] writing under `directory`.

    The backup keeps the previous state too (`double_checkpoint`), so a run killed while
    writing resumes from the one before. It is deleted when `fit` completes.
    """
    callbacks = [keras.callbacks.BackupAndRestore(
        os.path.join(directory, BACKUP_DIR), save_freq="epoch", double_checkpoint=True)]
    if tensorboard:
        callbacks.append(keras.callbacks.TensorBoard(
            os.path.join(directory, LOGS_DIR), update_freq=log_every_n_steps))
    return callbacks


def completed_batches(directory, steps_per_epoch):
    """How many batches the backed-up run in `directory` consumed (0 if there is none)."""
    metadata_path = os.path.join(directory, BACKUP_DIR, "training_metadata.json")
    if not os.path.exists(metadata_path):
        return 0
    with open(metadata_path) as f:
        return json.load(f)["epoch"] * steps_per_epoch
