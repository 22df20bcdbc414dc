"""Global attention a block of query rows at a time computes what the whole attention does."""

import numpy as np
from keras import ops

from keras_bert_suite.layers.query_chunks import query_blocked_attention
from keras_bert_suite.layers.sliding_window import masked_attention


def _attention_inputs(length=37, padded=5):
    rng = np.random.default_rng(0)
    query, key, value = (rng.normal(size=(2, length, 3, 8)).astype("float32")
                         for _ in range(3))
    padding_mask = np.ones((2, length), "int32")
    padding_mask[1, length - padded:] = 0  # the second row ends in padding
    keep_keys = padding_mask.astype(bool)[:, None, None, :]
    return query, key, value, keep_keys


def test_blocks_of_query_rows_give_the_whole_attention():
    query, key, value, keep_keys = _attention_inputs()
    whole = ops.convert_to_numpy(masked_attention(query, key, value, keep_keys))
    for block in (8, 37, 64):  # a ragged last block, one exact block, one block only
        blocked = ops.convert_to_numpy(
            query_blocked_attention(query, key, value, keep_keys, block=block))
        np.testing.assert_allclose(blocked, whole, rtol=1e-5, atol=1e-6)


def test_a_mask_per_query_is_cut_into_the_same_blocks():
    from keras_bert_suite.layers import packed_rows

    query, key, value, _ = _attention_inputs()
    instances = np.array([[1] * 20 + [2] * 17, [1] * 9 + [2] * 23 + [0] * 5], "int32")
    keep = packed_rows.attention_mask(instances)  # [B, 1, T, T]: each instance sees itself
    whole = ops.convert_to_numpy(masked_attention(query, key, value, keep))
    blocked = ops.convert_to_numpy(query_blocked_attention(query, key, value, keep, block=8))
    np.testing.assert_allclose(blocked, whole, rtol=1e-5, atol=1e-6)


def test_a_length_unknown_until_run_time_takes_the_blocked_form():
    import tensorflow as tf

    from keras_bert_suite.layers.serving import tf_ops

    query, key, value, keep_keys = _attention_inputs()
    whole = ops.convert_to_numpy(masked_attention(query, key, value, keep_keys))
    spec = tf.TensorSpec([None, None, 3, 8], tf.float32)

    @tf.function(input_signature=[spec, spec, spec, tf.TensorSpec([None, 1, 1, None], tf.bool)])
    def graph(q, k, v, keep):
        return query_blocked_attention(q, k, v, keep, block=8, ops=tf_ops)

    np.testing.assert_allclose(graph(query, key, value, keep_keys).numpy(), whole,
                               rtol=1e-5, atol=1e-6)
