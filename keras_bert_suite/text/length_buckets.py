"""Batches padded to their longest row, not to `sequence_length`: length buckets.

A preprocessor packs every row to the full `sequence_length`; most rows are much shorter
(Rotten Tomatoes sentences average ~25 WordPiece tokens of 64), so a fixed-length batch
spends most of the encoder's work on padding. Here each batch is cut to its longest row,
rounded up to the next bucket boundary: a handful of boundaries where each new shape
compiles a step (JAX, XLA); where none does, every multiple of 8 (TensorFlow's CPU step) or
every length (PyTorch's, as transformers' `DataCollatorWithPadding` pads): `length_step`. With
`group_batches`, training shuffles as usual, then sorts each group of that many batches by
length before it cuts them into batches (and shuffles the batches of the group), so a batch
holds rows of similar length: Hugging Face's `group_by_length`.

    rows = tf.data.Dataset.from_tensor_slices((inputs, labels))  # rows padded to 64
    batches = bucketed_batches(rows, batch_size=32, boundaries=bucket_boundaries(64),
                               shuffle=True, group_batches=50)

A row's length is read from its `padding_mask` (the last real position + 1), so the cut
never drops a real token. What is cut: the encoder inputs (`token_ids`, `segment_ids`,
`padding_mask`) on their last axis (a multiple-choice batch [B, C, T] is cut to its longest
choice), and labels / sample weights too when they have one entry per token
(`per_token_labels`).
"""

import math

import numpy as np
import tensorflow as tf

from keras_bert_suite.names import ENCODER_INPUTS

# Batches of length-sorted rows per group when training groups by length (Hugging Face's
# default mega-batch is 50 batches).
DEFAULT_GROUP_BATCHES = 50
# The shortest "auto" bucket: below it a batch is cheap whatever its length.
SMALLEST_BUCKET = 16


def bucket_boundaries(sequence_length, boundaries="auto", step=None):
    """The lengths a batch may be cut to, increasing, the last one `sequence_length`.

    "auto" with no `step` (a step function compiled once per shape): 16, 24, 32, 48, 64, 96,
    128, ... (each power of two and the midpoint above it) below `sequence_length`, then
    `sequence_length`: at most two shapes per doubling. "auto" with a `step` (one that runs
    any shape as it comes): every multiple of `step` (1: each batch cut to its longest row). A list
    of ints is checked (positive, increasing, none above `sequence_length`) and gets
    `sequence_length` appended when it does not end there.
    """
    if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) \
            or sequence_length < 1:
        raise ValueError(f"sequence_length must be a positive integer, got {sequence_length!r}.")
    if isinstance(boundaries, str):
        if boundaries != "auto":
            raise ValueError(f'bucket_boundaries must be "auto", a list of increasing lengths '
                             f"or None (pad every batch to sequence_length), got {boundaries!r}.")
        if step:
            return tuple(range(step, sequence_length, step)) + (sequence_length,)
        automatic, power = [], SMALLEST_BUCKET
        while power < sequence_length:
            automatic += [power, power * 3 // 2]
            power *= 2
        return tuple(b for b in automatic if b < sequence_length) + (sequence_length,)
    if not isinstance(boundaries, (list, tuple)):
        raise ValueError(f'bucket_boundaries must be "auto", a list of increasing lengths or '
                         f"None (pad every batch to sequence_length), got {boundaries!r}.")
    values = list(boundaries)
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"bucket_boundaries must be positive integers, got {values}.")
    if any(later <= earlier for earlier, later in zip(values, values[1:])):
        raise ValueError(f"bucket_boundaries must be strictly increasing, got {values}.")
    if values and values[-1] > sequence_length:
        raise ValueError(f"bucket_boundaries {values} go past sequence_length="
                         f"{sequence_length}: rows are never longer than that. Drop the "
                         f"larger boundaries or raise sequence_length.")
    if not values or values[-1] != sequence_length:
        values.append(sequence_length)
    return tuple(int(value) for value in values)


def length_step(jit_compile="auto"):
    """`bucket_boundaries`' "auto" step for a Keras step compiled with `jit_compile`: None
    (few shapes) where each new shape compiles (JAX; jit_compile=True; "auto" on TensorFlow
    with a GPU, where Keras turns XLA on), else 8 on TensorFlow (measured on a CPU: a MiniLM
    step at length 28 cost 97% of one at 32, oneDNN's kernels favour multiples of 8) and 1
    on PyTorch (cutting to the longest row took 14% off a Rotten Tomatoes fine-tune)."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax" or jit_compile is True:
        return None
    if backend == "tensorflow":
        return None if jit_compile == "auto" and tf.config.list_physical_devices("GPU") else 8
    return 1


def row_lengths(inputs):
    """[B] real lengths of a batch of encoder inputs: one past the last nonzero position of
    `padding_mask` ([B, T]; [B, C, T] gives each row's longest choice)."""
    mask = tf.convert_to_tensor(inputs["padding_mask"])
    real = tf.cast(mask != 0, tf.int32)
    positions = tf.range(1, tf.shape(mask)[-1] + 1, dtype=tf.int32)
    lengths = tf.reduce_max(real * positions, axis=-1)
    while lengths.shape.rank > 1:
        lengths = tf.reduce_max(lengths, axis=-1)
    return lengths


def cut_to_bucket(batch, boundaries, per_token_labels=False):
    """A batch `inputs`, `(inputs, labels)` or `(inputs, labels, weights)` with its token
    axes cut to the smallest boundary that holds its longest row."""
    parts = batch if isinstance(batch, tuple) else (batch,)
    inputs = parts[0]
    longest = tf.reduce_max(row_lengths(inputs))
    bucket_index = tf.searchsorted(tf.constant(boundaries, tf.int32), longest[None],
                                   side="left")[0]
    length = tf.gather(tf.constant(boundaries, tf.int32),
                       tf.minimum(bucket_index, len(boundaries) - 1))

    def cut(value):
        return value[..., :length]

    cut_inputs = {name: cut(value) if name in ENCODER_INPUTS else value
                  for name, value in inputs.items()}
    rest = parts[1:]
    if per_token_labels:
        rest = tuple(None if part is None else tf.nest.map_structure(
            lambda value: value[:, :length], part) for part in rest)
    out = (cut_inputs,) + tuple(rest)
    return out if isinstance(batch, tuple) else out[0]


def bucketed_batches(rows, batch_size, boundaries, shuffle=False, seed=None, group_batches=0,
                     per_token_labels=False, drop_remainder=False):
    """Unbatched `rows` (inputs padded to `sequence_length`, with labels and weights when
    given) -> batches cut to length buckets (see the module doc).

    boundaries: from `bucket_boundaries`, or None: every batch keeps `sequence_length`
        (static shapes, as TPUs want).
    shuffle: reshuffle the rows every epoch (seeded by `seed`).
    group_batches: with shuffle, sort each group of this many batches by length before
        batching (0: batches of random lengths).
    per_token_labels: labels and weights have one entry per token ([T]) and are cut too.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    if isinstance(group_batches, bool) or not isinstance(group_batches, int) \
            or group_batches < 0:
        raise ValueError(f"group_by_length must be a number of batches (0 or more), got "
                         f"{group_batches!r}.")
    count = int(rows.cardinality())
    if shuffle:
        rows = rows.shuffle(max(count, 1) if count > 0 else 10_000, seed=seed,
                            reshuffle_each_iteration=True)
    if shuffle and group_batches > 1 and boundaries is not None:
        group = group_batches * batch_size
        rows = rows.batch(group).map(_sorted_by_length, num_parallel_calls=tf.data.AUTOTUNE)
        rows = rows.unbatch()
        batches = rows.batch(batch_size, drop_remainder=drop_remainder)
        # Each group's batches are cut in length order: shuffle them (the groups themselves
        # come in random order already).
        batches = batches.shuffle(group_batches, seed=seed, reshuffle_each_iteration=True)
    else:
        batches = rows.batch(batch_size, drop_remainder=drop_remainder)
    if boundaries is not None:
        batches = batches.map(lambda *batch: cut_to_bucket(
            batch if len(batch) > 1 else batch[0], boundaries, per_token_labels),
            num_parallel_calls=tf.data.AUTOTUNE)
    if count > 0:  # unbatch() forgets the count: say it, so Keras shows steps per epoch
        steps = count // batch_size if drop_remainder else math.ceil(count / batch_size)
        batches = batches.apply(tf.data.experimental.assert_cardinality(steps))
    return batches.prefetch(tf.data.AUTOTUNE)


def rows_dataset(arrays):
    """Preprocessed rows, a tuple `(inputs, labels, weights)` of numpy structures (labels
    and weights optional), as an unbatched tf.data.Dataset for `bucketed_batches`."""
    arrays = tuple(arrays)
    return tf.data.Dataset.from_tensor_slices(arrays if len(arrays) > 1 else arrays[0])


def preprocessed_rows(examples, preprocessor, labelled=True, chunk_size=256):
    """An unbatched dataset of raw examples (`(text, label)` or `(text,)`) -> its rows
    through `preprocessor` (run on chunks, then split into rows and cached, so the text is
    tokenized once, not every epoch)."""
    count = int(examples.cardinality())
    rows = examples.batch(chunk_size).map(
        preprocessor if labelled else (lambda x: preprocessor(x)),
        num_parallel_calls=tf.data.AUTOTUNE).unbatch().cache()
    if count >= 0:
        rows = rows.apply(tf.data.experimental.assert_cardinality(count))
    return rows


def _sorted_by_length(*batch):
    """A batch of rows sorted by length (stable, so equal lengths keep the shuffled order)."""
    parts = batch if len(batch) > 1 else batch[0]
    inputs = parts[0] if isinstance(parts, tuple) else parts
    order = tf.argsort(row_lengths(inputs), stable=True)
    return tf.nest.map_structure(lambda value: tf.gather(value, order), parts)
