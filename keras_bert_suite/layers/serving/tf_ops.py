"""TensorFlow functions under keras.ops' names: the `ops` module the layers' math (written over
an `ops` argument, e.g. `attention.attend`, `gelu.erf_gelu`) runs on in the serving graph, in
any Keras backend's process."""

import tensorflow as tf

cast = tf.cast
# Attention's two products (`attention.attend`) as plain batched matmuls (BatchMatMulV2), as
# the serving graph computed them before the math was shared: TensorFlow's Einsum kernel
# plans its contraction on every call, which showed at batch 1 (bench/serving_latency.py
# --baseline-ref). Any other equation is tf.einsum's.
_AS_MATMUL = {"bnqd,bntd->bnqt": {"transpose_b": True}, "bnqt,bntd->bnqd": {}}


def einsum(equation, *operands):
    options = _AS_MATMUL.get(equation)
    if options is not None:
        return tf.linalg.matmul(*operands, **options)
    return tf.einsum(equation, *operands)


erf = tf.math.erf
tanh = tf.tanh
relu = tf.nn.relu
reshape = tf.reshape


def softmax(x, axis=-1):
    return tf.nn.softmax(x, axis=axis)


# The names the modern blocks' math uses besides (rotary.py, geglu.py, layer_norm.py,
# sliding_window.py, masked_softmax.py, modernbert_block.py).
abs = tf.abs  # noqa: A001 (keras.ops' name)
arange = tf.range
cos = tf.cos
sin = tf.sin
greater = tf.greater
logical_and = tf.logical_and
matmul = tf.matmul
pad = tf.pad
rsqrt = tf.math.rsqrt
shape = tf.shape
square = tf.square
where = tf.where


def concatenate(xs, axis=0):
    return tf.concat(xs, axis)


def mean(x, axis=None, keepdims=False):
    return tf.reduce_mean(x, axis, keepdims)


def sum(x, axis=None, keepdims=False):  # noqa: A001 (keras.ops' name)
    return tf.reduce_sum(x, axis, keepdims)


def split(x, parts, axis=0):
    return tf.split(x, parts, axis)


def squeeze(x, axis=None):
    return tf.squeeze(x, axis)
clip = tf.clip_by_value
take = tf.gather


def transpose(x, axes=None):
    return tf.transpose(x, axes)


def take_along_axis(x, indices, axis):
    """keras.ops.take_along_axis on the last axis, `indices` broadcast over the others
    (DeBERTa's relative scores)."""
    rank = len(x.shape)
    if axis % rank != rank - 1:
        raise ValueError("tf_ops.take_along_axis takes the last axis only.")
    shape = tf.concat([tf.shape(x)[:-1], tf.shape(indices)[-1:]], axis=0)
    return tf.gather(x, tf.broadcast_to(indices, shape), batch_dims=rank - 1)


def map(function, xs):  # noqa: A001 (keras.ops' name)
    """keras.ops.map: `function` on each slice of xs' first axis, stacked (a graph loop)."""
    first = tf.nest.flatten(xs)[0]
    return tf.map_fn(function, xs, fn_output_signature=first.dtype)


def cond(predicate, true_function, false_function):
    return tf.cond(predicate, true_function, false_function)
