"""What every DeBERTa block shares, built once per encoder: the relative embeddings (2 S rows,
`encoder.rel_embeddings` in transformers) and their LayerNorm (`encoder.LayerNorm`, v3's
`norm_rel_ebd` "layer_norm"), and the context each forward pass computes from them once."""

import keras
from keras import ops

from keras_bert_suite.layers.disentangled_attention import relative_embeddings
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.layers.relative_positions import relative_index_table, relative_indices


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class RelativeEmbeddings(keras.layers.Layer):
    """Call: padding_mask [B, T] -> {"relative": LayerNorm(table) [2 S, H], "indices": [T, T]
    int32, the row of distance i - j for query i, key j}. The bucket indices are gathered in
    the graph from an int32 table made once (`relative_positions.relative_index_table`), so
    every backend and the serving graph read the same rows."""

    def __init__(self, hidden_dim, position_buckets=256, max_relative_positions=512,
                 layer_norm_epsilon=1e-7, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.position_buckets = position_buckets
        self.max_relative_positions = max_relative_positions
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.index_table = relative_index_table(position_buckets, max_relative_positions)
        span = position_buckets if position_buckets > 0 else max_relative_positions
        self.rows = 2 * span
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.build()

    def build(self, padding_mask_shape=None):
        if self.built:
            return
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.rows, self.hidden_dim),
            initializer=BertInitializer(stddev=self.initializer_range))
        self.layer_norm.build((self.rows, self.hidden_dim))
        self.built = True

    def call(self, padding_mask):
        table = relative_embeddings(self.embeddings, self.layer_norm.gamma, self.layer_norm.beta,
                                    self.layer_norm_epsilon)  # [2 S, H]
        length = ops.shape(padding_mask)[1]
        return {"relative": ops.cast(table, self.compute_dtype),
                "indices": relative_indices(length, self.index_table)}

    def compute_output_spec(self, padding_mask):
        length = padding_mask.shape[1]
        return {"relative": keras.KerasTensor((self.rows, self.hidden_dim),
                                              dtype=self.compute_dtype),
                "indices": keras.KerasTensor((length, length), dtype="int32")}

    def get_config(self):
        return {**super().get_config(), "hidden_dim": self.hidden_dim,
                "position_buckets": self.position_buckets,
                "max_relative_positions": self.max_relative_positions,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range}
