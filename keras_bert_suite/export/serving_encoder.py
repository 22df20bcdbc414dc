"""ServingEncoder: a BertEncoder's function as a lean TensorFlow graph, for exported models.

It composes the serving forms of the encoder's layers (`keras_bert_suite/layers/serving/`:
embeddings, the embedding projection, each transformer block as the encoder schedules it, the
pooler), which compute the Keras layers' functions in the graph forms TensorFlow's CPU runtime
runs best, in float32 or with bf16 / int8 matmul kernels (docs/export.md, "The serving graph
and its precision"; docs/design.md, "Serving graph"). This module adds only what an export
decides: which kernels get which precision, and int8_vnni's smoothing and its calibration
(`check_precision` refuses int8_vnni on a CPU without VNNI / AMX: `cpu_features.py`).

It reads the weights by their canonical names (`BertEncoder.weight_map()`), so pruned encoders
(per-layer head counts and widths) and merged LoRA kernels are served as they are, and it
follows the encoder's family arguments (embedding projection, segment rows, positions from
the padding mask, GELU form, pooler activation, shared layers, causal attention).
"""

import numpy as np
import tensorflow as tf

from keras_bert_suite.export.cpu_features import require_int8_vnni
from keras_bert_suite.layers.serving.activations import POOLER
from keras_bert_suite.layers.serving.attention import attention_bias
from keras_bert_suite.layers.serving.dense import dense, reader
from keras_bert_suite.layers.serving.embeddings import embeddings
from keras_bert_suite.layers.serving.int8_matmul import (
    int8_copy, layer_norm_range, smoothing_factors)
from keras_bert_suite.layers.serving.transformer_block import transformer_block
from keras_bert_suite.names import ENCODER_INPUTS, SERVING_PRECISIONS


def check_precision(precision, calibration_texts=None):
    """ValueError for an unknown precision, calibration texts it does not take, or
    int8_vnni on a CPU without VNNI / AMX (`cpu_features.require_int8_vnni`)."""
    if precision not in SERVING_PRECISIONS:
        raise ValueError(f"precision must be one of {SERVING_PRECISIONS}, got {precision!r}.")
    if calibration_texts is not None:
        if precision != "int8_vnni":
            raise ValueError(
                f"Calibration texts are for precision='int8_vnni', not {precision!r} "
                "(int8 quantizes only the kernels: it has no activation ranges to calibrate).")
        if isinstance(calibration_texts, (str, bytes)) or not all(
                isinstance(text, str) for text in calibration_texts) or not calibration_texts:
            raise ValueError("calibration_texts must be a non-empty list of strings (real "
                             "text like what the model will serve; a few hundred are enough).")
    if precision == "int8_vnni":
        require_int8_vnni()


class ServingEncoder:
    """`encoder`'s inference function in plain TensorFlow ops, on the encoder's own variables
    (a SavedModel holds each weight once, whichever signatures read it).

    Call: {"token_ids", "segment_ids", "padding_mask"} [B, T] ints -> {"sequence_output"
    [B, T, H], "pooled_output" [B, H]} (and "hidden_states" [B, L + 1, T, H] when the
    encoder returns them), float32: what `encoder(inputs, training=False)` returns.
    """

    def __init__(self, encoder, precision="float32", calibration_inputs=None):
        """calibration_inputs: int8_vnni only, packed encoder inputs of real text (a few
        hundred sequences) whose activation ranges set the smoothing of the int8 matmuls;
        without them the ranges are estimated from the LayerNorm weights (docs/export.md)."""
        check_precision(precision)
        if calibration_inputs is not None and precision != "int8_vnni":
            raise ValueError(f"Calibration is for precision='int8_vnni', not {precision!r}.")
        self.weights = encoder.weight_map()
        # (heads, head width) per block, from the [H, 3, N, Dh] qkv kernels: pruned encoders
        # differ from block to block.
        self.head_shapes = [tuple(self.weights[f"layer_{index}/attention/qkv/kernel"].shape[2:])
                            for index in range(len(encoder.transformer_layers))]
        self.layer_blocks = encoder.layer_blocks
        self.hidden_dim = encoder.hidden_dim
        self.position_offset = encoder.position_offset
        self.activation = encoder.activation
        self.pooler_activation = POOLER[encoder.pooler_activation]
        self.epsilon = float(encoder.layer_norm_epsilon)
        self.return_hidden_states = encoder.return_hidden_states
        self.causal = encoder.causal
        self._observed = None  # {matmul kernel name: max |input| per channel} while calibrating
        smoothing = self._smoothing(calibration_inputs) if precision == "int8_vnni" else {}
        if precision != "float32":  # the matmul kernels as bf16 / int8 copies, made once
            self.weights = {name: _kernel_copy(name, value, precision, smoothing.get(name))
                            for name, value in self.weights.items()}

    def __call__(self, inputs):
        token_ids, segment_ids, padding_mask = (tf.cast(inputs[name], tf.int32)
                                                for name in ENCODER_INPUTS)
        shape = tf.shape(token_ids)
        batch, length = shape[0], shape[1]
        x = embeddings(reader(self.weights, "embeddings/"), token_ids, segment_ids, padding_mask,
                       "embeddings/segment_embedding" in self.weights, self.position_offset,
                       self.epsilon)  # [B T, E]
        if "embeddings/projection/kernel" in self.weights:
            x = dense(x, reader(self.weights, "embeddings/projection/"))  # [B T, H]
        bias = attention_bias(padding_mask, self.causal)
        hidden_states = [x]
        for block_indices in self.layer_blocks:
            for index in block_indices:
                x = self._block(index, x, bias, batch, length)
                hidden_states.append(x)
        sequence_output = tf.reshape(x, [batch, length, self.hidden_dim])
        pooled = self.pooler_activation(dense(sequence_output[:, 0], reader(self.weights,
                                                                            "pooler/")))
        outputs = {"sequence_output": sequence_output, "pooled_output": pooled}
        if self.return_hidden_states:
            outputs["hidden_states"] = tf.stack(
                [tf.reshape(h, [batch, length, self.hidden_dim]) for h in hidden_states], axis=1)
        return outputs

    def _block(self, index, x, bias, batch, length):
        prefix = f"layer_{index}/"
        num_heads, head_dim = self.head_shapes[index]
        observe = None
        if self._observed is not None:
            def observe(name, inputs):
                self._observe(prefix + name, inputs)
        return transformer_block(x, reader(self.weights, prefix), num_heads, head_dim,
                                 self.activation, self.epsilon, bias, batch, length, observe)

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


def _kernel_copy(name, value, precision, smoothing=None):
    """The weight `name` as the export stores it in `precision`. int8 stores every encoder
    matmul kernel in int8 (computed in float32: worst MiniLM sentence-embedding cosine to
    float32 on 256 held-out reviews 0.9990; 0.9995 with the FFN output in bf16, which would
    want bf16 hardware). int8_vnni quantizes every one but the FFN output's, which multiplies
    bf16: its inputs (GELU activations) span the widest uint8 range: 0.994 with it in int8,
    0.998 in bf16 (both calibrated; docs/export.md). The pooler stays
    float32, and so does ALBERT's / ELECTRA's embedding projection: its error reaches every
    layer (bf16: 3e-3 relative on the sequence output of a random 3-layer ELECTRA against
    8e-5 for BERT's), for E x H of the FLOPs (1/36 of one of ALBERT-base's layers)."""
    if not name.endswith("kernel") or name.startswith(("pooler", "embeddings/")):
        return value
    if precision == "bfloat16" or (precision == "int8_vnni" and _is_ffn_output(name)):
        return _bfloat16_copy(value)
    return int8_copy(value, vnni=precision == "int8_vnni", smoothing=smoothing)


def _is_ffn_output(name):
    return name.endswith("/output/kernel") and not name.endswith("attention/output/kernel")


def _bfloat16_copy(variable):
    return tf.Variable(tf.cast(tf.convert_to_tensor(variable), tf.bfloat16), trainable=False)
