"""Left-to-right, non-overlapping choice in runs of adjacent candidates (BPE merges of a
repeated pair, "``" replacement)."""

import tensorflow as tf


def every_other_in_runs(candidate, continues_row):
    """candidate [N] bool; continues_row [N] bool (False where a new row begins). Returns
    [N] bool: the 1st, 3rd, 5th... candidate of every run of adjacent candidates in a row,
    which is what scanning left to right and skipping what a choice overlaps keeps."""
    run_start = candidate & ~(tf.concat([[False], candidate[:-1]], axis=0) & continues_row)
    index = tf.range(tf.size(candidate, out_type=tf.int64))
    run_first = tf.gather(tf.concat([[0], tf.where(run_start)[:, 0]], axis=0),
                          tf.cumsum(tf.cast(run_start, tf.int64)))  # 0 before any run
    return candidate & tf.equal((index - run_first) % 2, 0)
