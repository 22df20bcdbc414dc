"""The serving form of `BertSelfAttention` (no dropout, every row a query): `attention.attend`
over TensorFlow ops, with the projections as 2-D matmuls in the export's precision."""

import tensorflow as tf

from keras_bert_suite.layers.attention import attend, padding_bias
from keras_bert_suite.layers.serving import tf_ops
from keras_bert_suite.layers.serving.dense import dense
from keras_bert_suite.layers.serving.int8_matmul import Int8Kernel


def key_bias(padding_mask):
    """[B, T] -> [B, 1, 1, T]: -1e9 on padded keys, added to the scores before the softmax;
    exp underflows to exactly 0, as with the Keras layer's boolean mask."""
    return padding_bias(padding_mask, tf_ops)


def self_attention(x, read, num_heads, head_dim, bias, batch, length):
    """x [B T, H] -> [B T, H]: the one fused q|k|v matmul, attention per head, the output
    projection. `read`: "qkv/kernel" [H, 3, N, Dh] (or its int8 copy, already 2-D),
    "qkv/bias" [3, N, Dh], "output/{kernel,bias}"; `bias`: `key_bias` of the padding."""
    def flat(name):  # the [H, 3 N Dh] kernel and [3 N Dh] bias of the one qkv matmul
        value = read(name)
        if isinstance(value, Int8Kernel):  # stored 2-D
            return value
        return tf.reshape(value, [value.shape[0], -1] if name.endswith("kernel") else [-1])
    qkv = dense(x, flat, "qkv/")  # [B T, 3 N Dh]
    qkv = tf.reshape(qkv, [batch, length, 3, num_heads, head_dim])
    query, key, value = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # [B, N, T, Dh]
    context = attend(query, key, value, lambda scores: scores + bias, tf_ops)  # [B, N, T, Dh]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, num_heads * head_dim])
    return dense(context, read, "output/")


def attention_bias(padding_mask, causal=False):
    """`key_bias`, and for a causal encoder -1e9 on every key after its query too ([B, 1,
    T, T]): `packed_rows.attention_mask(padding_mask, causal)` of a 0/1 mask as a bias."""
    bias = key_bias(padding_mask)  # [B, 1, 1, T]
    if not causal:
        return bias
    index = tf.range(tf.shape(padding_mask)[1])
    later = tf.cast(index[None, :] > index[:, None], tf.float32)  # [T, T]: key after query
    return bias + later[None, None] * -1e9
