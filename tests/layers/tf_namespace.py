"""TensorFlow functions under the keras.ops names the new blocks' math uses: the ops module of a
serving graph, runnable in any Keras backend's process. (The serving adapters' own ops module
has to offer at least these names.)"""

import types

import tensorflow as tf


def _take_along_axis(x, indices, axis):
    # keras.ops broadcasts `indices` over x's other axes; tf.gather wants them spelled out.
    rank = len(x.shape)
    axis = axis % rank
    assert axis == rank - 1, "only the last axis is needed"
    shape = tf.concat([tf.shape(x)[:-1], tf.shape(indices)[-1:]], axis=0)
    return tf.gather(x, tf.broadcast_to(indices, shape), batch_dims=rank - 1)


TF_OPS = types.SimpleNamespace(
    abs=tf.abs,
    arange=tf.range,
    cast=tf.cast,
    clip=tf.clip_by_value,
    concatenate=lambda xs, axis=0: tf.concat(xs, axis),
    cos=tf.cos,
    einsum=tf.einsum,
    erf=tf.math.erf,
    logical_and=tf.logical_and,
    matmul=tf.matmul,
    mean=lambda x, axis=None, keepdims=False: tf.reduce_mean(x, axis, keepdims),
    pad=tf.pad,
    reshape=tf.reshape,
    rsqrt=tf.math.rsqrt,
    shape=tf.shape,
    sin=tf.sin,
    softmax=lambda x, axis=-1: tf.nn.softmax(x, axis=axis),
    split=lambda x, parts, axis=0: tf.split(x, parts, axis),
    square=tf.square,
    squeeze=lambda x, axis=None: tf.squeeze(x, axis),
    take=tf.gather,
    take_along_axis=_take_along_axis,
    transpose=lambda x, axes=None: tf.transpose(x, axes),
    where=tf.where,
)
