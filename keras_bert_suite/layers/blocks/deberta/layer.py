"""DeBERTa's block as a Keras layer: BERT's post-LayerNorm block (`bert/layer.py`, whose math
it runs) around disentangled self-attention (`attention.py`)."""

import keras
from keras import ops

from keras_bert_suite.layers.blocks.bert.layer import TransformerBlock
from keras_bert_suite.layers.blocks.deberta.attention import DisentangledSelfAttention
from keras_bert_suite.layers.gather_rows import gather_rows


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class DebertaBlock(TransformerBlock):
    """x = LN(x + DisentangledAttention(x)); x = LN(x + FFN(x)), BERT's sublayers otherwise.

    Call: x [B, T, H] and the context of `relative.py` ({"keep", "relative", "indices"});
    `positions` [B, Q]: the output at those rows only ([B, Q, H]), gathered after the block
    (disentangled attention has no query-only path yet).
    `position_terms`: the position terms of the attention ("c2p", "p2c").
    """

    def __init__(self, num_heads, hidden_dim, intermediate_dim, position_terms=("p2c", "c2p"),
                 **kwargs):
        # Read by `_make_attention`, which TransformerBlock's __init__ calls.
        self._position_terms = tuple(position_terms)
        super().__init__(num_heads, hidden_dim, intermediate_dim, **kwargs)

    def _make_attention(self, num_heads, hidden_dim, dropout, initializer_range, head_dim):
        return DisentangledSelfAttention(
            num_heads, hidden_dim, position_terms=self._position_terms, dropout=dropout,
            initializer_range=initializer_range, head_dim=head_dim, dtype=self.dtype_policy,
            name="attention")

    @property
    def position_terms(self):
        return self._position_terms

    def build(self, x_shape, context_shape=None, positions_shape=None):
        super().build(x_shape)

    def call(self, x, context=None, training=None, positions=None):
        x = super().call(x, context, training=training)
        return x if positions is None else gather_rows(x, positions)

    def intermediate_activations(self, x, context=None):
        """GELU(x' W_in + b_in) [B, T, I] without dropout (x' the attention sublayer's output):
        what neuron pruning scores by."""
        x = ops.convert_to_tensor(x, dtype=self.compute_dtype)
        attended = self._attention_sublayer(x, context, training=False)
        return self._activation(self.intermediate_dense(attended))

    def compute_output_shape(self, x_shape, context_shape=None, positions_shape=None):
        if positions_shape is not None:
            return tuple(positions_shape) + (x_shape[-1],)
        return tuple(x_shape)

    def get_config(self):
        return {**super().get_config(), "position_terms": list(self._position_terms)}
