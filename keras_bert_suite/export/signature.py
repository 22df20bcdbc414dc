"""What a task hands export: its serving signatures, each a TF function of named inputs."""

import dataclasses

import tensorflow as tf

from keras_bert_suite.export import serving_graph
from keras_bert_suite.names import ENCODER_INPUTS

# A batch of strings: the input of every raw-text signature.
STRINGS = tf.TensorSpec([None], tf.string)


@dataclasses.dataclass
class ServingSignature:
    """One signature of the SavedModel.

    function: a function of named tf arguments returning a dict of tensors, every one with
        the batch as its first dimension (so TF Serving's row format works).
    input_signature: one `tf.TensorSpec` per argument, in order.
    warmup_inputs: {argument: list of real example values} for the warmup file, or None.
    """

    function: object
    input_signature: list
    warmup_inputs: dict = None

    @property
    def input_names(self):
        code = self.function.__code__
        return list(code.co_varnames[:code.co_argcount])


def graph_model_call(model):
    """inputs -> the model's outputs at inference, as a dict of float32 tensors ("logits" for
    a single output): how a serving function calls the model inside the traced graph. The
    encoder runs as a `ServingEncoder` (the same function in faster TF ops), the task's
    head layers as they are."""
    run = serving_graph.model_call(model)

    def call(inputs):
        outputs = run(inputs)
        if not isinstance(outputs, dict):
            outputs = {"logits": outputs}
        return {name: tf.cast(tf.stack(value, axis=1) if isinstance(value, (list, tuple))
                              else value, tf.float32)
                for name, value in outputs.items()}
    return call


def encoder_inputs_signature(model):
    """The model on packed ids (token_ids, segment_ids, padding_mask; [B, T], or [B, C, T]
    for a model whose `input_rank` is 3), its outputs out: for clients that tokenize."""
    rank = getattr(model, "input_rank", 2)
    call = graph_model_call(model)

    def encoder_inputs(token_ids, segment_ids, padding_mask):
        return call({"token_ids": token_ids, "segment_ids": segment_ids,
                     "padding_mask": padding_mask})

    specs = [tf.TensorSpec([None] * rank, tf.int32, name=name) for name in ENCODER_INPUTS]
    return ServingSignature(encoder_inputs, specs)


EMBEDDING_WARMUP = {"text": ["A man is eating food.", "A man is riding a horse."]}


def text_outputs_signature(model, preprocessor, output_names=None):
    """text [B] -> the model's outputs (all, or `output_names`) on the packed text, plus
    padding_mask [B, T] and truncated [B] (the text did not fit in sequence_length)."""
    if preprocessor is None:
        raise ValueError(f"Exporting a {type(model).__name__} with raw-text signatures needs a "
                         "preprocessor: pass preprocessor=BertPreprocessor.from_preset(...).")
    call = graph_model_call(model)

    def serve(text):
        packed, truncated = preprocessor.pack_with_truncation(text)
        outputs = call(packed)
        if output_names is not None:
            outputs = {name: outputs[name] for name in output_names}
        return {**outputs, "padding_mask": packed["padding_mask"], "truncated": truncated}

    return ServingSignature(serve, [STRINGS], EMBEDDING_WARMUP)
