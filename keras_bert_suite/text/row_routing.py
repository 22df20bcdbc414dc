"""Recomputing a few rows of a ragged batch on a slower, exact path."""

import tensorflow as tf


def replace_rows(raggeds, mask, recompute):
    """Returns `raggeds` (a tuple of [B, None] ragged tensors with equal row lengths) with the
    rows where `mask` [B] holds replaced.

    recompute(row_indices [K] int64) -> a tuple of [K, None] ragged tensors, the new rows in that
    order. It only runs (inside a tf.cond) when at least one row needs it, so a batch that needs
    nothing pays nothing.
    """
    raggeds = tuple(raggeds)
    rows = tf.where(mask)[:, 0]

    def merged():
        replacements = recompute(rows)
        batch = tf.shape(mask, out_type=tf.int64)[0]
        position = tf.cumsum(tf.cast(mask, tf.int64), exclusive=True)
        source = tf.where(mask, batch + position, tf.range(batch))
        return _components(tuple(tf.gather(tf.concat([old, new], axis=0), source)
                                 for old, new in zip(raggeds, replacements)))

    # The cond passes plain tensors: ragged outputs would be boxed into one variant per row
    # and unboxed again, which costs more than the tokenization itself inside tf.data.
    row_splits, *values = tf.cond(
        tf.reduce_any(mask), merged, lambda: _components(raggeds))
    return tuple(tf.RaggedTensor.from_row_splits(v, row_splits, validate=False) for v in values)


def _components(raggeds):
    return [raggeds[0].row_splits] + [r.values for r in raggeds]
