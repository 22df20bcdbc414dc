"""BERT's post-LayerNorm transformer block as a Keras layer: its sublayers and variables; the
forward pass is `math.block` over them."""

import keras
from keras import ops

from keras_bert_suite.layers.attention import BertSelfAttention
from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.layers.gelu import feed_forward_activation
from keras_bert_suite.layers.lora_dense import LoraDense
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.layers.blocks.bert import math
from keras_bert_suite.layers.blocks.keras_parts import KerasParts


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class TransformerBlock(keras.layers.Layer):
    """x = LN(x + Attention(x)); x = LN(x + FFN(x)) with FFN = Dense(GELU(Dense(x))).

    `activation` is the FFN's GELU: "gelu", the exact erf form that the released BERT,
    RoBERTa, DistilBERT and ELECTRA checkpoints were trained with, or "gelu_approximate",
    the tanh form of ALBERT's.
    `num_heads` heads of `head_dim` (default hidden_dim // num_heads; a pruned layer has
    fewer heads of the unpruned size, see `BertSelfAttention`).
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        head_dim=None,
        activation="gelu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.head_dim = head_dim
        self.activation = activation
        self._activation = feed_forward_activation(activation)

        initializer = BertInitializer(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = self._make_attention(num_heads, hidden_dim, dropout,
                                              initializer_range, head_dim)
        self.attention_dropout = BertDropout(dropout, dtype=policy)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_layer_norm")
        self.intermediate_dense = LoraDense(
            intermediate_dim, kernel_initializer=initializer, dtype=policy, name="intermediate")
        self.output_dense = LoraDense(
            hidden_dim, kernel_initializer=initializer, dtype=policy, name="output")
        self.output_dropout = BertDropout(dropout, dtype=policy)
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="output_layer_norm")

    def _make_attention(self, num_heads, hidden_dim, dropout, initializer_range, head_dim):
        """The attention sublayer (BERT's; a kind with other attention around the same block,
        DeBERTa's, overrides this)."""
        return BertSelfAttention(
            num_heads, hidden_dim, dropout=dropout, initializer_range=initializer_range,
            head_dim=head_dim, dtype=self.dtype_policy, name="attention")

    def build(self, x_shape, attention_mask_shape=None, positions_shape=None):
        x_shape = tuple(x_shape)
        self.attention.build(x_shape)
        self.attention_layer_norm.build(x_shape)
        self.intermediate_dense.build(x_shape)
        self.output_dense.build(x_shape[:-1] + (self.intermediate_dim,))
        self.output_layer_norm.build(x_shape)
        self.built = True

    def call(self, x, attention_mask=None, training=None, positions=None):
        """`attention_mask`: [B, 1, 1, T] (a key padding mask) or [B, 1, T, T] (one row per
        query: packed rows), True = attend.
        `positions` [B, Q]: compute the output at these rows of `x` only ([B, Q, H]).

        Every row's output depends on all of `x` through attention's keys and values only,
        so the rows at `positions` are exactly those of the full output; the query
        projection, attention output, FFN and LayerNorms then run on Q rows instead of T.
        """
        queries = None
        if positions is not None:
            queries = gather_rows(x, positions)
            if attention_mask is not None and attention_mask.shape[2] != 1:
                # A per-query mask ([B, 1, T, T], packed rows): the queries' rows of it.
                attention_mask = gather_rows(attention_mask[:, 0], positions)[:, None]  # [B,1,Q,T]
        return math.block(x, _Sublayers(self, attention_mask, training), queries)

    def intermediate_activations(self, x, attention_mask=None):
        """The feed-forward network's hidden activations GELU(x' W_in + b) [B, T, I] (x' the
        attention sublayer's output), without dropout: what neuron pruning scores by."""
        x = ops.convert_to_tensor(x, dtype=self.compute_dtype)
        if attention_mask is not None:
            attention_mask = ops.convert_to_tensor(attention_mask)
        return math.feed_forward_hidden(self._attention_sublayer(x, attention_mask, False),
                                        _Sublayers(self, attention_mask, training=False))

    def queries_keys_values(self, x):
        """{"q", "k", "v"}: the attention's projections of `x`, heads concatenated ->
        [B, T, N * Dh] each (MiniLM distillation's relations; one fused matmul)."""
        qkv = self.attention.qkv(x)  # [B, T, 3, N, Dh]
        batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
        parts = ops.split(ops.reshape(qkv, (batch, length, 3, self.attention_width)), 3, axis=2)
        return {name: ops.squeeze(part, axis=2) for name, part in zip("qkv", parts)}

    @property
    def attention_width(self):
        """N * Dh: the width of the concatenated heads (hidden_dim unless pruned)."""
        return self.attention.attention_dim

    def _attention_sublayer(self, x, attention_mask, training=None, queries=None):
        """LN(x + Attention(x)) (`math.attention_sublayer`), at the rows of `queries`."""
        return math.attention_sublayer(x, _Sublayers(self, attention_mask, training), queries)

    def compute_output_shape(self, x_shape, attention_mask_shape=None, positions_shape=None):
        if positions_shape is not None:
            return tuple(positions_shape) + (x_shape[-1],)
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            intermediate_dim=self.intermediate_dim,
            dropout=self.dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range,
            head_dim=self.head_dim,
            activation=self.activation,
        )
        return config


class _Sublayers(KerasParts):
    """A TransformerBlock's sublayers under the names its math calls them by (`math.py`)."""

    def __init__(self, block, attention_mask, training):
        super().__init__(block, {"intermediate": block.intermediate_dense,
                                 "output": block.output_dense}, training)
        self.attention_mask = attention_mask

    def attention(self, x, queries):
        return self.block.attention(x, self.attention_mask, training=self.training,
                                    queries=queries)
