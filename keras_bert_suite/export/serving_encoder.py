"""ServingEncoder: a BertEncoder's function as a lean TensorFlow graph, for exported models.

The Keras encoder traced into a SavedModel runs what Keras writes for every backend: einsum
projections, Dense on 3-D inputs (reshape, matmul, reshape, then the bias) and Keras'
attention. This graph computes the same function from the same weights in the forms that
TensorFlow's CPU runtime (oneDNN) and Grappler's remapper handle best: 2-D `MatMul` +
`BiasAdd` pairs (fused into one oneDNN call), batched matmuls for attention, padding as an
additive key bias, and optionally bf16 or int8 matmul kernels (docs/export.md, "The serving
graph and its precision"; docs/design.md, "Serving graph").

It reads the weights by their canonical names (`BertEncoder.weight_map()`), so pruned encoders
(per-layer head counts and widths) and merged LoRA kernels are served as they are, and it
follows the encoder's family arguments (embedding projection, segment rows, positions from
the padding mask, GELU form, pooler activation, shared layers).
"""

import math

import numpy as np
import tensorflow as tf

from keras_bert_suite.export.int8_matmul import (
    Int8Kernel, int8_copy, int8_dense, layer_norm_range, smoothing_factors)
from keras_bert_suite.names import ENCODER_INPUTS, SERVING_PRECISIONS


def check_precision(precision, calibration_texts=None):
    if precision not in SERVING_PRECISIONS:
        raise ValueError(f"precision must be one of {SERVING_PRECISIONS}, got {precision!r}.")
    if calibration_texts is None:
        return
    if precision != "int8":
        raise ValueError(f"Calibration texts are for precision='int8', not {precision!r}.")
    if isinstance(calibration_texts, (str, bytes)) or not all(
            isinstance(text, str) for text in calibration_texts) or not calibration_texts:
        raise ValueError("calibration_texts must be a non-empty list of strings (real text "
                         "like what the model will serve; a few hundred are enough).")


class ServingEncoder:
    """`encoder`'s inference function in plain TensorFlow ops, on the encoder's own variables
    (a SavedModel holds each weight once, whichever signatures read it).

    Call: {"token_ids", "segment_ids", "padding_mask"} [B, T] ints -> {"sequence_output"
    [B, T, H], "pooled_output" [B, H]} (and "hidden_states" [B, L + 1, T, H] when the
    encoder returns them), float32: what `encoder(inputs, training=False)` returns.
    """

    def __init__(self, encoder, precision="float32", calibration_inputs=None):
        """calibration_inputs: int8 only, packed encoder inputs of real text (a few hundred
        sequences) whose activation ranges set the smoothing of the int8 matmuls; without
        them the ranges are estimated from the LayerNorm weights (docs/export.md)."""
        check_precision(precision)
        if calibration_inputs is not None and precision != "int8":
            raise ValueError(f"Calibration is for precision='int8', not {precision!r}.")
        self.weights = encoder.weight_map()
        # (heads, head width) per block, from the [H, 3, N, Dh] qkv kernels: pruned encoders
        # differ from block to block.
        self.head_shapes = [tuple(self.weights[f"layer_{index}/attention/qkv/kernel"].shape[2:])
                            for index in range(len(encoder.transformer_layers))]
        self.layer_blocks = encoder.layer_blocks
        self.hidden_dim = encoder.hidden_dim
        self.embedding_width = encoder.embedding_dim or encoder.hidden_dim
        self.position_offset = encoder.position_offset
        self.activation = _ACTIVATIONS[encoder.activation]
        self.pooler_activation = _POOLER_ACTIVATIONS[encoder.pooler_activation]
        self.epsilon = float(encoder.layer_norm_epsilon)
        self.return_hidden_states = encoder.return_hidden_states
        self._observed = None  # {matmul kernel name: max |input| per channel} while calibrating
        smoothing = self._smoothing(calibration_inputs) if precision == "int8" else {}
        if precision != "float32":  # the matmul kernels as bf16 / int8 copies, made once
            self.weights = {name: _kernel_copy(name, value, precision, smoothing.get(name))
                            for name, value in self.weights.items()}

    def __call__(self, inputs):
        read = self._reader("embeddings/")
        token_ids, segment_ids, padding_mask = (tf.cast(inputs[name], tf.int32)
                                                for name in ENCODER_INPUTS)
        shape = tf.shape(token_ids)
        batch, length = shape[0], shape[1]
        x = tf.gather(read("token_embedding"), token_ids)  # [B, T, E]
        if "embeddings/segment_embedding" in self.weights:
            x += tf.gather(read("segment_embedding"), segment_ids)
        if self.position_offset:  # positions counted over real tokens (RoBERTa)
            positions = (tf.cumsum(padding_mask, axis=1) * padding_mask
                         + (self.position_offset - 1))
            x += tf.gather(read("position_embedding"), positions)
        else:
            x += read("position_embedding")[:length]
        x = tf.reshape(x, [-1, self.embedding_width])  # [B T, E]: every projection is 2-D
        x = self._layer_norm(x, read, "layer_norm")
        if "embeddings/projection/kernel" in self.weights:
            x = _dense(x, read, "projection/")  # [B T, H]
        # Keys at padding get -1e9 before the softmax: exp underflows to exactly 0, as with
        # the Keras model's boolean mask.
        key_bias = (1.0 - tf.cast(padding_mask, tf.float32))[:, None, None, :] * -1e9
        hidden_states = [x]
        for block_indices in self.layer_blocks:
            for index in block_indices:
                x = self._block(index, x, key_bias, batch, length)
                hidden_states.append(x)
        read = self._reader("pooler/")
        sequence_output = tf.reshape(x, [batch, length, self.hidden_dim])
        pooled = self.pooler_activation(_dense(sequence_output[:, 0], read, ""))
        outputs = {"sequence_output": sequence_output, "pooled_output": pooled}
        if self.return_hidden_states:
            outputs["hidden_states"] = tf.stack(
                [tf.reshape(h, [batch, length, self.hidden_dim]) for h in hidden_states], axis=1)
        return outputs

    def _reader(self, prefix):
        """name -> the tensor of weight `prefix + name` (float32, or the bf16 / int8 kernels)."""
        def read(name):
            value = self.weights[prefix + name]
            if isinstance(value, Int8Kernel):
                return value
            value = tf.convert_to_tensor(value)
            return value if value.dtype == tf.bfloat16 else tf.cast(value, tf.float32)
        return read

    def _block(self, index, x, key_bias, batch, length):
        prefix = f"layer_{index}/"
        read = self._reader(prefix)
        num_heads, head_dim = self.head_shapes[index]

        def flat(name):  # the [H, 3 N Dh] kernel and [3 N Dh] bias of the one qkv matmul
            value = read(name)
            if isinstance(value, Int8Kernel):  # made 2-D when quantized
                return value
            return tf.reshape(value, [self.hidden_dim, -1] if name.endswith("kernel") else [-1])
        self._observe(prefix + "attention/qkv/kernel", x)
        qkv = _dense(x, flat, "attention/qkv/")  # [B T, 3 N Dh]
        qkv = tf.reshape(qkv, [batch, length, 3, num_heads, head_dim])
        query, key, value = tf.unstack(tf.transpose(qkv, [2, 0, 3, 1, 4]))  # [B, N, T, Dh]
        scores = tf.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(head_dim))
        context = tf.matmul(tf.nn.softmax(scores + key_bias), value)  # [B, N, T, Dh]
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, num_heads * head_dim])
        x = self._layer_norm(x + _dense(context, read, "attention/output/"), read,
                             "attention_layer_norm")
        self._observe(prefix + "intermediate/kernel", x)
        hidden = self.activation(_dense(x, read, "intermediate/"))
        return self._layer_norm(x + _dense(hidden, read, "output/"), read, "output_layer_norm")

    def _smoothing(self, calibration_inputs):
        """{kernel name: per-input-channel factors} for the int8 matmuls fed by a LayerNorm."""
        if calibration_inputs is None:
            ranges = {name: layer_norm_range(self.weights, norm)
                      for name, norm in self._smoothed_matmuls().items()}
        else:
            ranges = self._input_ranges(calibration_inputs)
        return {name: smoothing_factors(ranges[name], self.weights[name],
                                        calibrated=calibration_inputs is not None)
                for name in self._smoothed_matmuls()}

    def _smoothed_matmuls(self):
        """{kernel name: the LayerNorm whose output it multiplies}, for the kernels fed by
        one LayerNorm: not a block whose input is the embedding projection's output, nor one
        that ALBERT runs on several blocks' outputs."""
        feeders = {}  # block -> the LayerNorms whose outputs its query/key/value multiply
        previous = "embeddings/layer_norm"
        if "embeddings/projection/kernel" in self.weights:
            previous = None
        for index in (index for indices in self.layer_blocks for index in indices):
            feeders.setdefault(index, set()).add(previous)
            previous = f"layer_{index}/output_layer_norm"
        names = {}
        for index in range(len(self.head_shapes)):
            if len(feeders.get(index, ())) == 1 and None not in feeders[index]:
                names[f"layer_{index}/attention/qkv/kernel"] = next(iter(feeders[index]))
            names[f"layer_{index}/intermediate/kernel"] = f"layer_{index}/attention_layer_norm"
        return names

    def _input_ranges(self, calibration_inputs, batch_size=32):
        """Runs this (float32) graph eagerly over the calibration inputs, recording the
        largest |input| of each smoothed matmul per channel."""
        self._observed = {}
        try:
            with tf.init_scope():  # eager, also when first called inside a trace
                count = len(calibration_inputs[ENCODER_INPUTS[0]])
                for start in range(0, count, batch_size):
                    self({name: tf.constant(values[start:start + batch_size])
                          for name, values in calibration_inputs.items()})
            return self._observed
        finally:
            self._observed = None

    def _observe(self, name, x):
        if self._observed is not None:
            largest = tf.reduce_max(tf.abs(x), axis=0).numpy()
            self._observed[name] = np.maximum(self._observed.get(name, 0.0), largest)

    def _layer_norm(self, x, read, name):
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return ((x - mean) * tf.math.rsqrt(variance + self.epsilon) * read(name + "/gamma")
                + read(name + "/beta"))


def _dense(x, read, prefix):
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


def _kernel_copy(name, value, precision, smoothing=None):
    """The weight `name` as the export stores it in `precision`. int8 quantizes every encoder
    matmul but the FFN output's, which multiplies bf16: its inputs (GELU activations) span the
    widest range: worst MiniLM sentence-embedding cosine to float32 on held-out reviews 0.994
    with it in int8, 0.998 in bf16 (both calibrated; docs/export.md). The pooler stays
    float32, and so does ALBERT's / ELECTRA's embedding projection: its error reaches every
    layer (bf16: 3e-3 relative on the sequence output of a random 3-layer ELECTRA against
    8e-5 for BERT's), for E x H of the FLOPs (1/36 of one of ALBERT-base's layers)."""
    if not name.endswith("kernel") or name.startswith(("pooler", "embeddings/")):
        return value
    if precision == "bfloat16" or _is_ffn_output(name):
        return _bfloat16_copy(value)
    return int8_copy(value, smoothing)


def _is_ffn_output(name):
    return name.endswith("/output/kernel") and not name.endswith("attention/output/kernel")


def _bfloat16_copy(variable):
    return tf.Variable(tf.cast(tf.convert_to_tensor(variable), tf.bfloat16), trainable=False)


def _exact_gelu(x):
    return 0.5 * x * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))


def _tanh_gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


# The encoder's `activation` and `pooler_activation` names, in TensorFlow ops.
_ACTIVATIONS = {"gelu": _exact_gelu, "gelu_approximate": _tanh_gelu}
_POOLER_ACTIVATIONS = {"tanh": tf.tanh, "gelu": _exact_gelu, "relu": tf.nn.relu}
