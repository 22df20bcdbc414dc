"""BERT input embeddings: token + segment + learned position, then LayerNorm and dropout.

The family's variations are arguments: no segment table (DistilBERT: `num_segments=0`) and
positions counted from the padding mask past an offset (RoBERTa / XLM-R:
`position_offset=2`). A narrower embedding width with a projection (ALBERT, ELECTRA) is the
encoder's `embedding_dim`: this layer is then that wide."""

import keras
from keras import ops

from keras_bert_suite.layers import packed_rows
from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.initializer import BertInitializer


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertEmbeddings(keras.layers.Layer):
    """Sums token, segment and position embeddings, as in BERT section 3.

    Inputs: `token_ids` [B, T] and `segment_ids` [B, T], integers; `padding_mask` [B, T]
    (1 = real token, or a packed row's instance numbers: positions restart at each
    instance, see layers/packed_rows.py), needed when `position_offset` > 0.
    Output: [B, T, hidden_dim].

    `num_segments=0`: no segment table (DistilBERT); `segment_ids` are then ignored.
    `position_offset=k` (RoBERTa, XLM-R: k = pad id + 1 = 2): the table has
    max_sequence_length + k rows; real token t (0-based) reads row k + t and padding reads
    row k - 1, as transformers' `create_position_ids_from_input_ids` numbers them.
    `position_rows=False`: no position table (ModernBERT, DeBERTa-v3: their blocks see
    positions); `layer_norm_bias=False`: a LayerNorm without offset (ModernBERT).
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
        position_offset=0,
        position_rows=True,
        layer_norm_bias=True,
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
        self.position_offset = position_offset
        self.position_rows = position_rows
        self.layer_norm_bias = layer_norm_bias

        initializer = BertInitializer(stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, hidden_dim, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="token_embedding")
        self.segment_embedding = None
        if num_segments:
            self.segment_embedding = keras.layers.Embedding(
                num_segments, hidden_dim, embeddings_initializer=initializer,
                dtype=self.dtype_policy, name="segment_embedding")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=layer_norm_bias, dtype=self.dtype_policy,
            name="layer_norm")
        self.dropout_layer = BertDropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, token_ids_shape, segment_ids_shape=None, padding_mask_shape=None):
        self.token_embedding.build(token_ids_shape)
        if self.segment_embedding is not None:
            self.segment_embedding.build(token_ids_shape)
        self.position_embedding = None
        if self.position_rows:
            self.position_embedding = self.add_weight(
                name="position_embedding",
                shape=(self.max_sequence_length + self.position_offset, self.hidden_dim),
                initializer=BertInitializer(stddev=self.initializer_range),
            )
        self.layer_norm.build(tuple(token_ids_shape) + (self.hidden_dim,))
        self.built = True

    def call(self, token_ids, segment_ids, padding_mask=None, training=None):
        return self.embed_with(self, token_ids, segment_ids, padding_mask, training)

    def embed_with(self, tables, token_ids, segment_ids, padding_mask=None, training=None):
        """`call`, reading the rows through `tables` (`rows`, `has_segments`, `norm`, as
        `embed` takes them): a discriminator under gradient-disentangled embedding sharing
        reads other token rows through this layer's positions, LayerNorm and dropout."""
        positions = (self._positions(token_ids, padding_mask) if self.position_rows
                     else None)
        x = embed(tables, token_ids, segment_ids, positions)
        return self.dropout_layer(x, training=training)

    # The parts `embed` calls.
    @property
    def has_segments(self):
        return self.segment_embedding is not None

    def rows(self, table, ids):
        return getattr(self, table)(ids)

    def norm(self, x):
        return self.layer_norm(x)

    def _positions(self, token_ids, padding_mask):
        """[1, T, H] rows 0..T-1 of the table without a padding mask, else [B, T, H] rows
        numbered within each instance of a packed row (layers/packed_rows.py; a 0/1 mask
        reads rows 0..T-1 too), past `position_offset` counting real tokens only."""
        # Cast the rows read, not the whole table (a mixed-precision policy casts every call).
        if padding_mask is None and not self.position_offset:
            rows = self.position_embedding[:ops.shape(token_ids)[1]][None]
        elif padding_mask is None:
            raise ValueError("BertEmbeddings with position_offset > 0 numbers positions "
                             "from the padding mask: pass padding_mask.")
        elif not self.position_offset:
            rows = ops.take(self.position_embedding, packed_rows.positions(padding_mask),
                            axis=0)
        else:
            real = ops.cast(ops.greater(ops.cast(padding_mask, "int32"), 0), "int32")
            positions = offset_positions(packed_rows.tokens_before_in_instance(padding_mask),
                                         real, self.position_offset)  # [B, T]
            rows = ops.take(self.position_embedding, positions, axis=0)
        return ops.cast(rows, self.compute_dtype)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None,
                             padding_mask_shape=None):
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
            position_offset=self.position_offset,
            position_rows=self.position_rows,
            layer_norm_bias=self.layer_norm_bias,
        )
        return config


# === The embeddings' math (the serving graph's form: layers/serving/embeddings.py) ===

def embed(parts, token_ids, segment_ids, position_rows):
    """LN(token rows + segment rows + position rows), BERT section 3.2 (no segment rows
    without a segment table: DistilBERT; none of `position_rows` when it is None).
    `parts`: `rows(table, ids)` of "token_embedding" /
    "segment_embedding", `has_segments`, `norm(x)` (the LayerNorm)."""
    x = parts.rows("token_embedding", token_ids)
    if parts.has_segments:
        x = x + parts.rows("segment_embedding", segment_ids)
    if position_rows is not None:
        x = x + position_rows
    return parts.norm(x)


def offset_positions(tokens_before, real, offset):
    """The position row of each token past `offset` (RoBERTa's, as transformers'
    `create_position_ids_from_input_ids` numbers them): real token t of its instance reads row
    offset + t, padding row offset - 1. `tokens_before`: [B, T] tokens of the same instance
    before each; `real`: [B, T] 1 on real tokens, 0 on padding."""
    return (tokens_before + 1) * real + (offset - 1)
