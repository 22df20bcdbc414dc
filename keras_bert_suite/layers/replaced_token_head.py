"""ELECTRA's discriminator head: for every token, a logit that it replaced the original."""

import keras
from keras import ops

from keras_bert_suite.layers.gelu import feed_forward_activation
from keras_bert_suite.layers.initializer import BertInitializer


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ReplacedTokenHead(keras.layers.Layer):
    """sequence_output [B, T, H] -> Dense(H) -> the encoder's GELU -> Dense(1) -> logits
    [B, T] (positive: replaced), as ELECTRA's `discriminator_predictions`.

    Args:
        hidden_dim: H, the encoder's width.
        activation: "gelu" (exact, ELECTRA's) or "gelu_approximate": the encoder's.
        initializer_range: stddev of the truncated-normal kernel initializer.
    """

    def __init__(self, hidden_dim, activation="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.activation = activation
        self._activation = feed_forward_activation(activation)
        self.initializer_range = initializer_range
        initializer = BertInitializer(stddev=initializer_range)
        self.dense = keras.layers.Dense(hidden_dim, kernel_initializer=initializer,
                                        dtype=self.dtype_policy, name="dense")
        self.prediction = keras.layers.Dense(1, kernel_initializer=initializer,
                                             dtype=self.dtype_policy, name="prediction")

    def build(self, sequence_output_shape):
        self.dense.build(sequence_output_shape)
        self.prediction.build(tuple(sequence_output_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, sequence_output):
        hidden = self._activation(self.dense(sequence_output))
        return ops.squeeze(self.prediction(hidden), axis=-1)  # [B, T]

    def compute_output_shape(self, sequence_output_shape):
        return tuple(sequence_output_shape[:-1])

    def get_config(self):
        return {**super().get_config(), "hidden_dim": self.hidden_dim,
                "activation": self.activation, "initializer_range": self.initializer_range}
