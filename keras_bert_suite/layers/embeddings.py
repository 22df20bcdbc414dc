"""BERT input embeddings: token + segment + learned position, then LayerNorm and dropout."""

import keras
from keras import ops

from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.initializer import BertInitializer


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertEmbeddings(keras.layers.Layer):
    """Sums token, segment and position embeddings, as in BERT section 3.

    Inputs: `token_ids` [B, T] and `segment_ids` [B, T], integers.
    Output: [B, T, hidden_dim].
    """

    def __init__(
        self,
        vocabulary_size,
        max_sequence_length,
        num_segments,
        hidden_dim,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

        initializer = BertInitializer(stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, hidden_dim, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="token_embedding")
        self.segment_embedding = keras.layers.Embedding(
            num_segments, hidden_dim, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="segment_embedding")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.dropout_layer = BertDropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        self.segment_embedding.build(token_ids_shape)
        self.position_embedding = self.add_weight(
            name="position_embedding",
            shape=(self.max_sequence_length, self.hidden_dim),
            initializer=BertInitializer(stddev=self.initializer_range),
        )
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_dim,))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        sequence_length = ops.shape(token_ids)[1]
        positions = ops.cast(self.position_embedding[:sequence_length], self.compute_dtype)  # [T, H]
        x = (
            self.token_embedding(token_ids)
            + self.segment_embedding(segment_ids)
            + positions[None, :, :]
        )  # [B, T, H]
        return self.dropout_layer(self.layer_norm(x), training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size,
            max_sequence_length=self.max_sequence_length,
            num_segments=self.num_segments,
            hidden_dim=self.hidden_dim,
            dropout=self.dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range,
        )
        return config
