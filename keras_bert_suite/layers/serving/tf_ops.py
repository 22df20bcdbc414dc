"""TensorFlow functions under keras.ops' names: the `ops` module the layers' math (written over
an `ops` argument, e.g. `attention.attend`, `gelu.erf_gelu`) runs on in the serving graph, in
any Keras backend's process."""

import tensorflow as tf

cast = tf.cast
einsum = tf.einsum
erf = tf.math.erf
tanh = tf.tanh
relu = tf.nn.relu
reshape = tf.reshape


def softmax(x, axis=-1):
    return tf.nn.softmax(x, axis=axis)
