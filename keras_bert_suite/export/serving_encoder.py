"""ServingEncoder: a BertEncoder's function as a lean TensorFlow graph, for exported models.

The Keras encoder traced into a SavedModel runs what Keras writes for every backend: einsum
projections, Dense on 3-D inputs (reshape, matmul, reshape, then the bias) and Keras'
attention. This graph computes the same function from the same weights in the forms that
TensorFlow's CPU runtime (oneDNN) and Grappler's remapper handle best: 2-D `MatMul` +
`BiasAdd` pairs (fused into one oneDNN call), batched matmuls for attention, padding as an
additive key bias, and optionally bf16 matmul kernels (docs/export.md, "The serving graph and
its precision"; docs/design.md, "Serving graph").

It reads the weights by their canonical names (`BertEncoder.weight_map()`), so pruned encoders
(per-layer head counts and widths) and merged LoRA kernels are served as they are.
"""

import math

import tensorflow as tf

from keras_bert_suite.names import ENCODER_INPUTS


PRECISIONS = ("float32", "bfloat16")


def check_precision(precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}.")


class ServingEncoder:
    """`encoder`'s inference function in plain TensorFlow ops, on the encoder's own variables
    (a SavedModel holds each weight once, whichever signatures read it).

    Call: {"token_ids", "segment_ids", "padding_mask"} [B, T] ints -> {"sequence_output"
    [B, T, H], "pooled_output" [B, H]} (and "hidden_states" [B, L + 1, T, H] when the
    encoder returns them), float32: what `encoder(inputs, training=False)` returns.
    """

    def __init__(self, encoder, precision="float32"):
        check_precision(precision)
        self.weights = encoder.weight_map()
        if precision == "bfloat16":  # the matmul kernels as bf16 copies, made once
            self.weights = {name: (_bfloat16_copy(value) if name.endswith("kernel")
                                   and not name.startswith("pooler") else value)
                            for name, value in self.weights.items()}
        self.num_layers = encoder.num_layers
        self.hidden_dim = encoder.hidden_dim
        self.epsilon = float(encoder.layer_norm_epsilon)
        self.return_hidden_states = encoder.return_hidden_states

    def __call__(self, inputs):
        read = self._reader("embeddings/")
        token_ids, segment_ids, padding_mask = (tf.cast(inputs[name], tf.int32)
                                                for name in ENCODER_INPUTS)
        shape = tf.shape(token_ids)
        batch, length = shape[0], shape[1]
        x = (tf.gather(read("token_embedding"), token_ids)
             + tf.gather(read("segment_embedding"), segment_ids)
             + read("position_embedding")[:length])  # [B, T, H]
        x = tf.reshape(x, [-1, self.hidden_dim])  # [B T, H]: every projection is a 2-D matmul
        x = self._layer_norm(x, read, "layer_norm")
        # Keys at padding get -1e9 before the softmax: exp underflows to exactly 0, as with
        # the Keras model's boolean mask.
        key_bias = (1.0 - tf.cast(padding_mask, tf.float32))[:, None, None, :] * -1e9
        hidden_states = [x]
        for index in range(self.num_layers):
            x = self._block(self._reader(f"layer_{index}/"), x, key_bias, batch, length)
            hidden_states.append(x)
        read = self._reader("pooler/")
        sequence_output = tf.reshape(x, [batch, length, self.hidden_dim])
        pooled = tf.tanh(_dense(sequence_output[:, 0], read, ""))
        outputs = {"sequence_output": sequence_output, "pooled_output": pooled}
        if self.return_hidden_states:
            outputs["hidden_states"] = tf.stack(
                [tf.reshape(h, [batch, length, self.hidden_dim]) for h in hidden_states], axis=1)
        return outputs

    def _reader(self, prefix):
        """name -> the tensor of weight `prefix + name` (float32, or the bf16 kernels)."""
        def read(name):
            value = tf.convert_to_tensor(self.weights[prefix + name])
            return value if value.dtype == tf.bfloat16 else tf.cast(value, tf.float32)
        read.prefix = prefix
        return read

    def _block(self, read, x, key_bias, batch, length):
        _, _, num_heads, head_dim = self.weights[
            read.prefix + "attention/qkv/kernel"].shape  # [H, 3, N, Dh]

        def flat(name):  # the [H, 3 N Dh] kernel and [3 N Dh] bias of the one qkv matmul
            return tf.reshape(read(name), [self.hidden_dim, -1] if name.endswith("kernel")
                              else [-1])
        qkv = _dense(x, flat, "attention/qkv/")  # [B T, 3 N Dh]
        qkv = tf.reshape(qkv, [batch, length, 3, num_heads, head_dim])
        query, key, value = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # [B, N, T, Dh]
        scores = tf.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(head_dim))
        context = tf.matmul(tf.nn.softmax(scores + key_bias), value)  # [B, N, T, Dh]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, num_heads * head_dim])
        x = self._layer_norm(x + _dense(context, read, "attention/output/"), read,
                             "attention_layer_norm")
        hidden = _exact_gelu(_dense(x, read, "intermediate/"))
        return self._layer_norm(x + _dense(hidden, read, "output/"), read, "output_layer_norm")

    def _layer_norm(self, x, read, name):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return ((x - mean) * tf.math.rsqrt(variance + self.epsilon) * read(name + "/gamma")
                + read(name + "/beta"))


def _dense(x, read, prefix):
    """x [M, in] @ kernel + bias as MatMul + BiasAdd, the pair oneDNN fuses. A bf16 kernel
    multiplies x rounded to bf16, accumulating in fp32 (oneDNN's AMX / AVX512_BF16 kernels),
    and the sum comes back as float32: LayerNorm, softmax and the residual stay fp32."""
    kernel = read(prefix + "kernel")
    if kernel.dtype == tf.bfloat16:
        product = tf.cast(tf.matmul(tf.cast(x, tf.bfloat16), kernel), tf.float32)
    else:
        product = tf.matmul(x, kernel)
    return tf.nn.bias_add(product, read(prefix + "bias"))


def _bfloat16_copy(variable):
    return tf.Variable(tf.cast(tf.convert_to_tensor(variable), tf.bfloat16), trainable=False)


def _exact_gelu(x):
    return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
