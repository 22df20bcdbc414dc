"""DeBERTa's disentangled self-attention as a Keras layer: BERT's fused query/key/value and
output projections (the same weights, so LoRA, pruning and int8 treat it as BERT's), the
scores of `layers/disentangled_attention.py`."""

import keras
from keras import ops

from keras_bert_suite.layers.attention import BertSelfAttention
from keras_bert_suite.layers.disentangled_attention import disentangled_attention
from keras_bert_suite.layers.dropout import BertDropout


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class DisentangledSelfAttention(BertSelfAttention):
    """Inputs: `x` [B, T, H] and the context every block shares (`relative.py`): `keep`
    ([B, 1, 1, T] or [B, 1, T, T], True = attend), `relative` [2 S, H] (the normalized
    relative embeddings) and `indices` [T, T] (their row for each query, key pair).

    v3 shares the projections (transformers' `share_att_key`): the relative embeddings go
    through the tokens' own query and key projections, so the layer has BERT's weights only.
    `position_terms`: "c2p" (query by relative key), "p2c" (key by relative query).
    """

    def __init__(self, num_heads, hidden_dim, position_terms=("p2c", "c2p"), dropout=0.1,
                 initializer_range=0.02, head_dim=None, **kwargs):
        super().__init__(num_heads, hidden_dim, dropout=dropout,
                         initializer_range=initializer_range, head_dim=head_dim, **kwargs)
        self.position_terms = tuple(position_terms)
        # transformers drops the relative embeddings in every layer (`pos_dropout`).
        self.position_dropout = BertDropout(dropout, dtype=self.dtype_policy)

    def call(self, x, context, training=None, queries=None):
        if queries is not None:
            raise ValueError("Disentangled attention computes every row (its block gathers "
                             "rows after it); queries must be None.")
        parts = ops.split(self.qkv(x), 3, axis=2)  # 3 x [B, T, 1, N, Dh]
        query, key, value = (ops.squeeze(part, axis=2) for part in parts)  # [B, T, N, Dh]
        relative = self.position_dropout(ops.cast(context["relative"], self.compute_dtype),
                                         training=training)
        positions = self.qkv(relative[None])[0]  # [2 S, 3, N, Dh]
        position_query = positions[:, 0] if "p2c" in self.position_terms else None
        position_key = positions[:, 1] if "c2p" in self.position_terms else None
        dropout = None
        if training and self.dropout > 0:
            dropout = lambda probs: self.probs_dropout(probs, training=training)  # noqa: E731
        context = disentangled_attention(query, key, value, position_query, position_key,
                                         context["indices"], context["keep"], ops,
                                         self.compute_dtype, dropout)  # [B, T, N, Dh]
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        return self.output_dense(ops.reshape(context, (batch, length, self.attention_dim)))

    def build(self, x_shape, context_shape=None, queries_shape=None):
        super().build(x_shape)

    def compute_output_shape(self, x_shape, context_shape=None, queries_shape=None):
        return tuple(x_shape)

    def get_config(self):
        return {**super().get_config(), "position_terms": list(self.position_terms)}
