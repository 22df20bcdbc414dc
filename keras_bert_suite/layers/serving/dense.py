"""The serving form of `keras.layers.Dense` / `LoraDense` (merged) on 2-D inputs, in the
export's precision, and of `keras.layers.LayerNormalization`."""

import tensorflow as tf

from keras_bert_suite.layers.serving.int8_matmul import Int8Kernel, int8_dense


def dense(x, read, prefix=""):
    """x [M, in] @ kernel + bias as MatMul + BiasAdd, the pair oneDNN fuses. A bf16 kernel
    multiplies x rounded to bf16, accumulating in fp32 (oneDNN's AMX / AVX512_BF16 kernels),
    and the sum comes back as float32: LayerNorm, softmax and the residual stay fp32."""
    kernel = read(prefix + "kernel")
    if isinstance(kernel, Int8Kernel):
        return int8_dense(x, kernel, read(prefix + "bias"))
    if kernel.dtype == tf.bfloat16:
        product = tf.cast(tf.matmul(tf.cast(x, tf.bfloat16), kernel), tf.float32)
    else:
        product = tf.matmul(x, kernel)
    return tf.nn.bias_add(product, read(prefix + "bias"))


def layer_norm(x, read, prefix, epsilon):
    """LayerNormalization over the last axis with weights `prefix/gamma`, `prefix/beta`."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return ((x - mean) * tf.math.rsqrt(variance + epsilon) * read(prefix + "/gamma")
            + read(prefix + "/beta"))


def reader(weights, prefix=""):
    """read(name) -> the tensor of `weights[prefix + name]`: float32, or a bf16 / int8 kernel
    copy as the export made it."""
    def read(name):
        value = weights[prefix + name]
        if isinstance(value, Int8Kernel):
            return value
        value = tf.convert_to_tensor(value)
        return value if value.dtype == tf.bfloat16 else tf.cast(value, tf.float32)
    return read
