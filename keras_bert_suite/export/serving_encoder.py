"""ServingEncoder: a BertEncoder's function as a lean TensorFlow graph, for exported models.

It runs the encoder's forward pass (`models/schedule.py`, the Keras encoder's too) over the
serving forms of the encoder's layers (`keras_bert_suite/layers/serving/`: embeddings, the
embedding projection, the pooler; each block's from its block kind,
`BlockKind.serving_form`), which compute the Keras layers' functions in the graph forms TensorFlow's CPU runtime
runs best, in float32 or with bf16 / int8 matmul kernels (docs/export.md, "The serving graph
and its precision"; docs/design.md, "Serving graph"). This module adds only what an export
decides: which kernels get which precision (the block kind's `precision_overrides`), and
int8_vnni's smoothing (of the inputs its `smoothed_inputs` names) and its calibration
(`check_precision` refuses int8_vnni on a CPU without VNNI / AMX: `cpu_features.py`).

It reads the weights by their canonical names (`BertEncoder.weight_map()`), so pruned encoders
(per-layer head counts and widths) and merged LoRA kernels are served as they are, and it
follows the encoder's family arguments (embedding projection, segment rows, positions from
the padding mask, GELU form, pooler activation, shared layers, causal attention).
"""

import numpy as np
import tensorflow as tf

from keras_bert_suite.export.cpu_features import require_int8_vnni
from keras_bert_suite.layers.serving.dense import dense, reader
from keras_bert_suite.layers.serving.embeddings import embeddings
from keras_bert_suite.layers.serving.int8_matmul import (
    int8_copy, layer_norm_range, smoothing_factors)
from keras_bert_suite.layers.blocks import BLOCK_INPUT
from keras_bert_suite.models import schedule
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
        self.kind = encoder.block_kind
        # Each block's serving form, made from the float weights (pruned encoders' blocks
        # differ in shape).
        self.block_forms = [self.kind.serving_form(encoder.config, self._float_weights(index),
                                                   index)
                            for index in range(len(encoder.transformer_layers))]
        self.layer_blocks = encoder.layer_blocks
        self.hidden_dim = encoder.hidden_dim
        self.position_offset = encoder.position_offset
        self.epsilon = float(encoder.layer_norm_epsilon)
        self.return_hidden_states = encoder.return_hidden_states
        self.config = encoder.config
        self._observed = None  # {matmul kernel name: max |input| per channel} while calibrating
        # The kind's pieces around the blocks (context, finish, pooler) in TensorFlow ops, on
        # the float weights while calibrating, on the export's copies after.
        self.pieces = self.kind.encoder.serving(self.config, reader(self.weights))
        smoothing = self._smoothing(calibration_inputs) if precision == "int8_vnni" else {}
        if precision != "float32":  # the matmul kernels as bf16 / int8 copies, made once
            self.weights = {name: _kernel_copy(name, value, precision, self.kind,
                                               smoothing.get(name))
                            for name, value in self.weights.items()}
            self.pieces = self.kind.encoder.serving(self.config, reader(self.weights))

    def __call__(self, inputs):
        inputs = {name: tf.cast(inputs[name], tf.int32) for name in ENCODER_INPUTS}
        shape = tf.shape(inputs["token_ids"])
        batch, length = shape[0], shape[1]
        x, pooled, hidden_states = schedule.encode(_ServingStages(self, batch, length), inputs)
        outputs = {"sequence_output": tf.reshape(x, [batch, length, self.hidden_dim]),
                   "pooled_output": pooled}
        if self.return_hidden_states:
            outputs["hidden_states"] = tf.stack(
                [tf.reshape(h, [batch, length, self.hidden_dim]) for h in hidden_states], axis=1)
        return outputs

    def _float_weights(self, index):
        """read(template) -> block `index`'s weight as the encoder holds it."""
        weights = self.weights
        return lambda template: weights[f"layer_{index}/{template}"]

    def _block(self, index, x, context, batch, length):
        prefix = f"layer_{index}/"
        observe = None
        if self._observed is not None:
            def observe(name, inputs):
                self._observe(prefix + name, inputs)
        return self.block_forms[index](x, reader(self.weights, prefix), context, batch, length,
                                       observe)

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
        """{kernel name: the LayerNorm whose output it multiplies}, for the kernels the block
        kind smooths (`BlockKind.smoothed_inputs`) that one LayerNorm feeds: a kernel on the
        block's input only when that input is one LayerNorm's output (not the embedding
        projection's, nor, with ALBERT's shared blocks, several blocks' outputs)."""
        feeders = {}  # block -> the LayerNorms whose outputs are its input
        previous = "embeddings/layer_norm"
        if "embeddings/projection/kernel" in self.weights:
            previous = None
        output_norm = self.kind.output_norm
        for index in (index for indices in self.layer_blocks for index in indices):
            feeders.setdefault(index, set()).add(previous)
            previous = f"layer_{index}/{output_norm}" if output_norm else None
        names = {}
        for index in range(len(self.block_forms)):
            for template, norm in self.kind.smoothed_inputs.items():
                if norm != BLOCK_INPUT and f"layer_{index}/{norm}/gamma" in self.weights:
                    names[f"layer_{index}/{template}"] = f"layer_{index}/{norm}"
                # A norm the block lacks (ModernBERT's first block has no attention norm:
                # transformers' Identity) passes the block's input on.
                elif len(feeders.get(index, ())) == 1 and None not in feeders[index]:
                    names[f"layer_{index}/{template}"] = next(iter(feeders[index]))
        return names

    def _input_ranges(self, calibration_inputs, batch_size=32):
        """Runs this (float32) graph over the calibration inputs, traced once for every batch,
        recording the largest |input| of each smoothed matmul per channel. (Run eagerly, op
        by op, it took a quarter more CPU time.)"""
        spec = {name: tf.TensorSpec([None, None], tf.int32) for name in ENCODER_INPUTS}
        with tf.init_scope():  # eager, also when first called inside a trace
            batch_ranges = tf.function(self._batch_ranges, input_signature=[spec],
                                       autograph=False)
            count = len(calibration_inputs[ENCODER_INPUTS[0]])
            ranges = {}
            for start in range(0, count, batch_size):
                batch = {name: tf.constant(np.asarray(values[start:start + batch_size]),
                                           tf.int32)
                         for name, values in calibration_inputs.items()}
                for name, largest in batch_ranges(batch).items():
                    ranges[name] = np.maximum(ranges.get(name, 0.0), largest.numpy())
            return ranges

    def _batch_ranges(self, inputs):
        """{kernel name: max |input| per channel} over one batch (traced)."""
        self._observed = {}
        try:
            self(inputs)
            return self._observed
        finally:
            self._observed = None

    def _observe(self, name, x):
        if self._observed is not None:  # a shared block (ALBERT) runs several times
            largest = tf.reduce_max(tf.abs(x), axis=0)
            previous = self._observed.get(name)
            self._observed[name] = largest if previous is None else tf.maximum(previous,
                                                                               largest)


class _ServingStages:
    """The serving forms of a ServingEncoder's layers as `schedule.encode` runs them, on 2-D
    activations [B T, H]."""

    def __init__(self, encoder, batch, length):
        self.encoder, self.batch, self.length = encoder, batch, length
        self.layer_blocks = encoder.layer_blocks

    def embed(self, inputs):
        weights, pieces = self.encoder.weights, self.encoder.kind.encoder
        x = embeddings(reader(weights, "embeddings/"), inputs["token_ids"], inputs["segment_ids"],
                       inputs["padding_mask"], "embeddings/segment_embedding" in weights,
                       self.encoder.position_offset, self.encoder.epsilon,
                       pieces.position_rows, pieces.embedding_norm_bias)  # [B T, E]
        if "embeddings/projection/kernel" in weights:
            x = dense(x, reader(weights, "embeddings/projection/"))  # [B T, H]
        return x

    def context(self, inputs):
        return self.encoder.pieces.context(inputs, self.batch, self.length)

    def block(self, index, x, context, rows):
        return self.encoder._block(index, x, context, self.batch, self.length)

    def finish(self, x):
        return self.encoder.pieces.finish(x)

    def pool(self, x, inputs):
        return self.encoder.pieces.pool(x, inputs, self.batch, self.length)


def _kernel_copy(name, value, precision, kind, smoothing=None):
    """The weight `name` as the export stores it in `precision`. int8 stores every block
    matmul kernel in int8 (computed in float32: worst MiniLM sentence-embedding cosine to
    float32 on 256 held-out reviews 0.9990; 0.9995 with the FFN output in bf16, which would
    want bf16 hardware). int8_vnni quantizes every one but those the block kind keeps in
    another precision (`BlockKind.precision_overrides`; docs/export.md). The pooler stays
    float32, and so does ALBERT's / ELECTRA's embedding projection: its error reaches every
    layer (bf16: 3e-3 relative on the sequence output of a random 3-layer ELECTRA against
    8e-5 for BERT's), for E x H of the FLOPs (1/36 of one of ALBERT-base's layers)."""
    if not name.endswith("kernel") or name.startswith(("pooler", "embeddings/")):
        return value
    template = name.split("/", 1)[1]  # "layer_3/output/kernel" -> "output/kernel"
    precision = kind.precision_overrides.get(template, {}).get(precision, precision)
    if precision == "bfloat16":
        return _bfloat16_copy(value)
    return int8_copy(value, vnni=precision == "int8_vnni", smoothing=smoothing)


def _bfloat16_copy(variable):
    return tf.Variable(tf.cast(tf.convert_to_tensor(variable), tf.bfloat16), trainable=False)
