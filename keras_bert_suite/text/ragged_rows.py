"""Row ids of ragged batches without `RaggedTensor.value_rowids()`, which builds them with
`tf.repeat`: a dense [rows, longest row] mask. One long text (or word) in a batch of 64k
short ones made that mask gigabytes; a binary search over the row splits needs none."""

import tensorflow as tf


def value_rowids(ragged):
    """[B, None] ragged -> [N] the row of each value (int64)."""
    return rowids_from_splits(tf.cast(ragged.row_splits, tf.int64))


def rowids_from_splits(row_splits):
    """[B + 1] row splits -> [N] the row of each value."""
    return tf.searchsorted(row_splits[1:], tf.range(row_splits[-1], dtype=row_splits.dtype),
                           side="right", out_type=row_splits.dtype)


def with_rowids(ragged):
    """The same [B, None] ragged tensor with its row ids computed that way and kept, so that
    ragged ops that need them (reductions, concatenation) do not build the mask."""
    ragged = ragged.with_row_splits_dtype(tf.int64)
    return tf.RaggedTensor.from_value_rowids(ragged.values, value_rowids(ragged),
                                             nrows=ragged.nrows(), validate=False)
