"""The serving form of `keras.layers.Dense` / `LoraDense` (merged) on 2-D inputs, in the
export's precision, and of `keras.layers.LayerNormalization`."""

import tensorflow as tf

from keras_bert_suite.layers.serving.int8_matmul import Int8Kernel, int8_dense


def dense(x, read, prefix="", bias=True):
    """x [M, in] @ kernel + bias as MatMul + BiasAdd, the pair oneDNN fuses. A bf16 kernel
    multiplies x rounded to bf16, accumulating in fp32 (oneDNN's AMX / AVX512_BF16 kernels),
    and the sum comes back as float32: LayerNorm, softmax and the residual stay fp32.
    `bias=False`: a projection without bias (ModernBERT's), the kernel alone."""
    kernel = read(prefix + "kernel")
    if isinstance(kernel, Int8Kernel):
        offset = (read(prefix + "bias") if bias
                  else tf.zeros(tf.shape(kernel.column_scales), tf.float32))
        return int8_dense(x, kernel, offset)
    if kernel.dtype == tf.bfloat16:
        product = tf.cast(tf.matmul(tf.cast(x, tf.bfloat16), kernel), tf.float32)
    else:
        product = tf.matmul(x, kernel)
    return tf.nn.bias_add(product, read(prefix + "bias")) if bias else product


def layer_norm(x, read, prefix, epsilon, bias=True):
    """LayerNormalization over the last axis with weights `prefix/gamma`, `prefix/beta` (no
    beta unless `bias`)."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    x = (x - mean) * tf.math.rsqrt(variance + epsilon) * read(prefix + "/gamma")
    return x + read(prefix + "/beta") if bias else x


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
