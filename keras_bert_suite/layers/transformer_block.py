"""One post-LayerNorm transformer encoder block, as BERT uses it."""

import keras
from keras import ops

from keras_bert_suite.layers.attention import BertSelfAttention
from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.layers.gelu import feed_forward_activation
from keras_bert_suite.layers.lora_dense import LoraDense
from keras_bert_suite.layers.initializer import BertInitializer


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
        self.attention = BertSelfAttention(
            num_heads, hidden_dim, dropout=dropout, initializer_range=initializer_range,
            head_dim=head_dim, dtype=policy, name="attention")
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
        x = self._attention_sublayer(x, attention_mask, training, queries)  # [B, T or Q, H]
        hidden = self._activation(self.intermediate_dense(x))  # [B, T or Q, I]
        hidden = self.output_dense(hidden)
        return self.output_layer_norm(x + self.output_dropout(hidden, training=training))

    def _attention_sublayer(self, x, attention_mask, training=None, queries=None):
        """LN(x + Attention(x)), at the rows of `queries` when given."""
        attended = self.attention(x, attention_mask, training=training, queries=queries)
        x = x if queries is None else queries
        return self.attention_layer_norm(x + self.attention_dropout(attended, training=training))

    def intermediate_activations(self, x, attention_mask=None):
        """The feed-forward network's hidden activations GELU(x' W_in + b) [B, T, I] (x' the
        attention sublayer's output), without dropout: what neuron pruning scores by."""
        x = ops.convert_to_tensor(x, dtype=self.compute_dtype)
        if attention_mask is not None:
            attention_mask = ops.convert_to_tensor(attention_mask)
        return self._activation(self.intermediate_dense(
            self._attention_sublayer(x, attention_mask, training=False)))

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
