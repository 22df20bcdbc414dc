"""Folds multiple-choice inputs into the batch axis: [B, C, T] -> [B·C, T]."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class FoldChoices(keras.layers.Layer):
    """Reshapes [B, C, T] to [B·C, T] so the encoder scores every (context, choice) row.

    A layer rather than a bare `ops.reshape` because T is unknown while the functional
    graph is built; the reshape runs on concrete shapes at call time.

    Example:
    >>> token_ids = keras.ops.ones((2, 4, 64), dtype="int32")  # 2 questions, 4 choices each
    >>> tuple(FoldChoices()(token_ids).shape)
    (8, 64)
    """

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))  # [B·C, T]

    def compute_output_shape(self, input_shape):
        batch, choices = input_shape[0], input_shape[1]
        folded = batch * choices if batch is not None and choices is not None else None
        return (folded, input_shape[-1])
