"""The masked-LM head: decodes only the masked positions, through the tied token embedding."""

import keras
from keras import ops

from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.layers.gelu import exact_gelu
from keras_bert_suite.layers.quantized import float_embeddings
from keras_bert_suite.layers.initializer import BertInitializer


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedLMHead(keras.layers.Layer):
    """BERT's `cls/predictions`: gather -> Dense(H) -> GELU -> LayerNorm -> E^T + output bias.

    The hidden states at `mask_positions` are gathered first, so the [H, V] decoder runs on
    B·P rows (P = max predictions, ~20) instead of B·T (T = sequence length, 128-512).
    The decoder has no kernel of its own: it multiplies by the transposed token embedding
    matrix E [V, H] of `token_embedding`, as BERT does (tied input/output embeddings).

    Args:
        token_embedding: the encoder's `keras.layers.Embedding` (`encoder.token_embedding`).
            The head keeps a reference to the layer, not a copy, so both share one variable.
        layer_norm_epsilon: epsilon of the transform's LayerNorm.
        initializer_range: stddev of the truncated-normal kernel initializer.

    Inputs: `sequence_output` [B, T, H] and `mask_positions` [B, P] integer indices into T;
    or, with `mask_positions=None`, the hidden states already gathered, [B, P, H].
    Output: logits [B, P, V].

    Inside a `BertPretrainer` the tie survives `.keras` saving because the pretrainer rebuilds
    the head from its encoder. A standalone head serializes its embedding layer in
    `get_config` (KerasHub's convention), so it reloads with an embedding of its own.
    """

    def __init__(self, token_embedding, layer_norm_epsilon=1e-12, initializer_range=0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.vocabulary_size = token_embedding.input_dim
        self.hidden_dim = token_embedding.output_dim

        self.transform = keras.layers.Dense(
            self.hidden_dim,
            kernel_initializer=BertInitializer(stddev=initializer_range),
            dtype=self.dtype_policy, name="transform")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")

    def build(self, sequence_output_shape, mask_positions_shape=None):
        if not self.token_embedding.built:
            self.token_embedding.build()
        gathered_shape = (None, None, self.hidden_dim)
        self.transform.build(gathered_shape)
        self.layer_norm.build(gathered_shape)
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocabulary_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, mask_positions=None):
        x = sequence_output
        if mask_positions is not None:
            x = gather_rows(sequence_output, mask_positions)  # [B, P, H]
        x = exact_gelu(self.transform(x))  # exact erf GELU, as BERT trained
        x = self.layer_norm(x)
        embeddings = ops.cast(float_embeddings(self.token_embedding), self.compute_dtype)  # [V, H]
        logits = ops.matmul(x, ops.transpose(embeddings))  # [B, P, V]
        return logits + ops.cast(self.output_bias, self.compute_dtype)

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape=None):
        if mask_positions_shape is None:
            return tuple(sequence_output_shape[:-1]) + (self.vocabulary_size,)
        return tuple(mask_positions_shape) + (self.vocabulary_size,)

    def get_config(self):
        config = super().get_config()
        config.update(
            token_embedding=keras.layers.serialize(self.token_embedding),
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
        return cls(**config)
