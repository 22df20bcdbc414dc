"""The masked-LM head: decodes only the masked positions, through the tied token embedding."""

import keras
from keras import ops

from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.layers.gelu import feed_forward_activation
from keras_bert_suite.layers.float_weights import float_embeddings
from keras_bert_suite.layers.initializer import BertInitializer


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedLMHead(keras.layers.Layer):
    """BERT's `cls/predictions`: gather -> Dense(H -> E) -> GELU -> LayerNorm -> W^T + bias.

    The hidden states at `mask_positions` are gathered first, so the [H, V] decoder runs on
    B·P rows (P = max predictions, ~20) instead of B·T (T = sequence length, 128-512).
    The decoder has no kernel of its own: it multiplies by the transposed token embedding
    matrix W [V, E] of `token_embedding`, as BERT does (tied input/output embeddings). E is
    the embedding width: H for BERT, RoBERTa and DistilBERT; ALBERT's and ELECTRA's narrower
    tables make the transform project the hidden states H -> E first.

    Args:
        token_embedding: the encoder's `keras.layers.Embedding` (`encoder.token_embedding`).
            The head keeps a reference to the layer, not a copy, so both share one variable.
        layer_norm_epsilon: epsilon of the transform's LayerNorm.
        initializer_range: stddev of the truncated-normal kernel initializer.
        activation: the transform's GELU, "gelu" (exact erf, BERT, RoBERTa, DistilBERT,
            ELECTRA) or "gelu_approximate" (tanh, ALBERT): the encoder's `activation`.
        use_bias: whether the transform and its LayerNorm have biases (False: ModernBERT's
            prediction head).

    Inputs: `sequence_output` [B, T, H] and `mask_positions` [B, P] integer indices into T;
    or, with `mask_positions=None`, the hidden states already gathered, [B, P, H].
    Output: logits [B, P, V].

    Inside a `BertPretrainer` the tie survives `.keras` saving because the pretrainer rebuilds
    the head from its encoder. A standalone head serializes its embedding layer in
    `get_config` (KerasHub's convention), so it reloads with an embedding of its own.
    """

    def __init__(self, token_embedding, layer_norm_epsilon=1e-12, initializer_range=0.02,
                 activation="gelu", use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.use_bias = use_bias
        self.token_embedding = token_embedding
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.activation = activation
        self._activation = feed_forward_activation(activation)
        self.vocabulary_size = token_embedding.input_dim
        self.embedding_dim = token_embedding.output_dim

        self.transform = keras.layers.Dense(
            self.embedding_dim, use_bias=use_bias,
            kernel_initializer=BertInitializer(stddev=initializer_range),
            dtype=self.dtype_policy, name="transform")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=use_bias, dtype=self.dtype_policy,
            name="layer_norm")

    def build(self, sequence_output_shape, mask_positions_shape=None):
        if not self.token_embedding.built:
            self.token_embedding.build()
        self.transform.build((None, None, sequence_output_shape[-1]))  # H
        self.layer_norm.build((None, None, self.embedding_dim))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocabulary_size,), initializer="zeros")
        self.built = True

    def call(self, sequence_output, mask_positions=None):
        x = sequence_output
        if mask_positions is not None:
            x = gather_rows(sequence_output, mask_positions)  # [B, P, H]
        x = self._activation(self.transform(x))  # [B, P, E]
        x = self.layer_norm(x)
        embeddings = ops.cast(float_embeddings(self.token_embedding), self.compute_dtype)  # [V, E]
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
            activation=self.activation,
            use_bias=self.use_bias,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
        return cls(**config)
