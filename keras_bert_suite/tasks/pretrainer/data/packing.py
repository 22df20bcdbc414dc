"""Packed pretraining rows: several instances share one row of `sequence_length` tokens.

    ds = read_pretraining_tfrecords("train-*.tfrecord", 128, 20)   # one instance per record
    ds = pack_instances(ds, sequence_length=128, max_instances_per_row=3,
                        max_predictions_per_row=20)
    ds = apply_dynamic_masking(ds.batch(32), masker)    # masks per instance (dynamic_masking.py)

Instances (unbatched flat dicts as tfrecords.py reads them: `token_ids`, `segment_ids`,
`padding_mask` [L] with the real tokens first, optional `nsp_labels` [], and when statically
masked `mask_positions`, `mlm_labels`, `mlm_weights` [P]) are taken `window` at a time and
placed first-fit: each goes into the first row that still has room for its tokens, for its
predictions and for one more instance (at most `max_instances_per_row`). A row is then:

    token_ids, segment_ids  [T]  the instances one after the other, 0-padded
    padding_mask            [T]  the instance number 1, 2, ... K of every token, 0 = padding
    nsp_labels, nsp_weights [K]  per instance (weight 1.0), 0 / 0.0 for an empty slot
    mask_positions, mlm_labels, mlm_weights [P]  (masked input only) the instances'
                                 predictions one after the other, positions in the row

which BertPretrainer(max_instances_per_row=K) trains on with every instance's losses equal to
those it has alone in a row (block-diagonal attention, positions restarted per instance).
Unmasked instances are counted at the predictions dynamic masking will give them,
min(P, max(1, round(n * masked_lm_prob))), so a packed row never has more than P to make.
"""

import functools
import numbers

import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import predictions_per_instance

# Instances placed together: a larger window fills rows better (fewer half-empty rows at a
# window's end) and costs a [window, window] comparison per window.
DEFAULT_WINDOW = 256


def check_packing(sequence_length, max_instances_per_row, max_predictions_per_row, window=1):
    """ValueError for packing settings no row can be made with."""
    for name, value in (("sequence_length", sequence_length),
                        ("max_instances_per_row", max_instances_per_row),
                        ("max_predictions_per_row", max_predictions_per_row),
                        ("window", window)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def first_fit_rows(lengths, predictions, sequence_length, max_instances_per_row,
                   max_predictions_per_row):
    """The row (0, 1, ...) of each instance, [N] int32, first-fit in the given order.

    lengths, predictions: [N] int32 tokens and predictions of each instance (each at most a
    row's)."""
    lengths = tf.convert_to_tensor(lengths, tf.int32)
    predictions = tf.convert_to_tensor(predictions, tf.int32)
    count = tf.shape(lengths)[0]
    empty = tf.zeros([count], tf.int32)  # one possible row per instance

    def place(state, instance):
        tokens, predicted, instances, _ = state
        length, prediction = instance
        fits = ((tokens + length <= sequence_length)
                & (predicted + prediction <= max_predictions_per_row)
                & (instances < max_instances_per_row))
        row = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)  # an empty row fits
        one = tf.one_hot(row, count, dtype=tf.int32)
        return tokens + one * length, predicted + one * prediction, instances + one, row

    return tf.scan(place, (lengths, predictions), (empty, empty, empty, tf.constant(0)))[3]


def _pack_window(features, sequence_length, max_instances_per_row, max_predictions_per_row,
                 masked_lm_prob):
    """A batch of N instances -> a batch of R packed rows (see module doc)."""
    T, K, P = sequence_length, max_instances_per_row, max_predictions_per_row
    real = tf.cast(features["padding_mask"], tf.int32) > 0  # [N, L]
    lengths = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)  # [N]
    masked = "mlm_weights" in features
    if masked:
        valid_predictions = features["mlm_weights"] > 0  # [N, P']
        predictions = tf.reduce_sum(tf.cast(valid_predictions, tf.int32), axis=1)
    else:
        predictions = predictions_per_instance(lengths, masked_lm_prob, P)
    checks = [
        tf.debugging.assert_less_equal(
            lengths, T, message=f"An instance is longer than sequence_length={T}: make the "
            f"instances with the sequence_length of the packed rows."),
        tf.debugging.assert_less_equal(
            predictions, P, message=f"An instance has more predictions than "
            f"max_predictions_per_row={P}."),
    ]
    with tf.control_dependencies(checks):
        rows = first_fit_rows(lengths, predictions, T, K, P)  # [N]
    count = tf.shape(rows)[0]
    index = tf.range(count)
    earlier_same_row = (index[None, :] < index[:, None]) & (rows[None, :] == rows[:, None])
    earlier = tf.cast(earlier_same_row, tf.int32)  # [N, N]: j before i in i's row
    slot = tf.reduce_sum(earlier, axis=1)  # [N] 0-based instance number within the row
    offset = tf.reduce_sum(earlier * lengths[None, :], axis=1)  # [N] its first position
    num_rows = tf.reduce_max(rows) + 1

    def scatter(indices, valid, values, width):  # [N, W, 2], [N, W], [N, W] -> [R, width]
        return tf.scatter_nd(tf.boolean_mask(indices, valid), tf.boolean_mask(values, valid),
                             [num_rows, width])

    def at(columns):  # [N, W] columns of each instance's row -> [N, W, 2] (row, column)
        return tf.stack([tf.broadcast_to(rows[:, None], tf.shape(columns)), columns], axis=-1)

    token_at = at(offset[:, None] + tf.range(tf.shape(real)[1])[None, :])
    out = {name: scatter(token_at, real, tf.cast(features[name], tf.int32), T)
           for name in ("token_ids", "segment_ids")}
    out["padding_mask"] = scatter(token_at, real, tf.broadcast_to(
        slot[:, None] + 1, tf.shape(real)), T)
    if masked:
        prediction_offset = tf.reduce_sum(earlier * predictions[None, :], axis=1)  # [N]
        prediction_at = at(prediction_offset[:, None] + tf.range(
            tf.shape(valid_predictions)[1])[None, :])
        values = {"mask_positions": tf.cast(features["mask_positions"], tf.int32)
                  + offset[:, None],
                  "mlm_labels": tf.cast(features["mlm_labels"], tf.int32),
                  "mlm_weights": tf.cast(features["mlm_weights"], tf.float32)}
        out.update({name: scatter(prediction_at, valid_predictions, value, P)
                    for name, value in values.items()})
    if "nsp_labels" in features:
        slot_at = tf.stack([rows, slot], axis=1)  # [N, 2]
        out["nsp_labels"] = tf.scatter_nd(slot_at, tf.cast(features["nsp_labels"], tf.int32),
                                          [num_rows, K])
        out["nsp_weights"] = tf.scatter_nd(slot_at, tf.ones([count], tf.float32),
                                           [num_rows, K])
    return out


def instance_features(instances, sequence_length, max_predictions_per_seq, masked=True):
    """PretrainingInstances -> flat numpy features (our names, one padded row each), the
    input of `pack_instances`; without `masked` no prediction features (unmasked
    instances are then packed at the predictions dynamic masking will give them)."""
    import numpy as np

    def pad(rows, width, dtype="int32"):
        return np.array([list(row) + [0] * (width - len(row)) for row in rows], dtype)

    features = {
        "token_ids": pad([i.token_ids for i in instances], sequence_length),
        "segment_ids": pad([i.segment_ids for i in instances], sequence_length),
        "padding_mask": pad([[1] * len(i.token_ids) for i in instances], sequence_length),
        "nsp_labels": np.array([int(i.is_random_next) for i in instances], "int32"),
    }
    if masked:
        features.update(
            mask_positions=pad([i.masked_lm_positions for i in instances],
                               max_predictions_per_seq),
            mlm_labels=pad([i.masked_lm_ids for i in instances], max_predictions_per_seq),
            mlm_weights=pad([[1.0] * len(i.masked_lm_ids) for i in instances],
                            max_predictions_per_seq, "float32"))
    return features


def pack_instances(dataset, sequence_length, max_instances_per_row, max_predictions_per_row,
                   masked_lm_prob=0.15, window=DEFAULT_WINDOW):
    """A tf.data of instances -> a tf.data of packed rows (see module doc), unbatched.

    `masked_lm_prob` is dynamic masking's rate (for unmasked instances: how many
    predictions each will get). An instance longer than `sequence_length`, or with more
    predictions than `max_predictions_per_row`, stops the iteration with an error that says so.
    """
    check_packing(sequence_length, max_instances_per_row, max_predictions_per_row, window)
    spec = dataset.element_spec
    if not isinstance(spec, dict) or "padding_mask" not in spec:
        raise ValueError(f"pack_instances takes flat dicts of instance features (token_ids, "
                         f"segment_ids, padding_mask, ...); got {spec!r}.")
    pack = functools.partial(_pack_window, sequence_length=sequence_length,
                             max_instances_per_row=max_instances_per_row,
                             max_predictions_per_row=max_predictions_per_row,
                             masked_lm_prob=masked_lm_prob)
    return dataset.batch(window).map(pack, num_parallel_calls=tf.data.AUTOTUNE,
                                     deterministic=True).unbatch()
