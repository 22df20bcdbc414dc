"""ModernBERT's block as a Keras layer: its sublayers and variables; the forward pass is
`layers/modernbert_block.py`'s `block` over them."""

import keras
from keras import ops

from keras_bert_suite.layers import modernbert_block
from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.blocks.keras_parts import KerasParts
from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.layers.gelu import feed_forward_activation
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.layers.lora_dense import FusedQKV, LoraDense
from keras_bert_suite.layers.query_chunks import query_blocked_attention
from keras_bert_suite.layers.sliding_window import band, masked_attention, windowed_attention


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ModernBertBlock(keras.layers.Layer):
    """x = x + Attention(LN(x)); x = x + W_o GeGLU(W_i LN(x)): pre-norm, no biases, rotary
    attention, global or within |i - j| <= `radius` (`attention`: "global" / "local").

    `first`: block 0 of the encoder, whose attention norm is the identity (it has no weight).
    A local block attends within its window with `windowed_attention` (cost linear in T) when
    the length is unknown or longer than the window (2 radius), else with the band mask: the
    same numbers either way (a packed row's instances are told apart by the band-masked form
    and the global layers only).
    """

    def __init__(self, num_heads, hidden_dim, intermediate_dim, attention="global", radius=64,
                 first=False, dropout=0.0, layer_norm_epsilon=1e-5, initializer_range=0.02,
                 head_dim=None, activation="gelu", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.attention = attention
        self.radius = radius
        self.first = first
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.head_dim = head_dim
        self.activation = activation
        self._activation = feed_forward_activation(activation)
        self._head_dim = hidden_dim // num_heads if head_dim is None else head_dim

        initializer = BertInitializer(stddev=initializer_range)
        policy = self.dtype_policy

        def norm(name):
            return keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, center=False,
                                                   dtype=policy, name=name)

        self.attention_norm = None if first else norm("attention_norm")
        self.qkv = FusedQKV("bth,hcnd->btcnd", output_shape=(None, 3, num_heads, self._head_dim),
                            kernel_initializer=initializer, dtype=policy, name="qkv")
        self.attention_output = LoraDense(hidden_dim, use_bias=False,
                                          kernel_initializer=initializer, dtype=policy,
                                          name="attention_output")
        self.feed_forward_norm = norm("feed_forward_norm")
        self.feed_forward_input = LoraDense(2 * intermediate_dim, use_bias=False,
                                            kernel_initializer=initializer, dtype=policy,
                                            name="feed_forward_input")
        self.feed_forward_output = LoraDense(hidden_dim, use_bias=False,
                                             kernel_initializer=initializer, dtype=policy,
                                             name="feed_forward_output")
        self.probs_dropout = BertDropout(dropout, dtype=policy)
        self.attention_dropout = BertDropout(dropout, dtype=policy)
        self.feed_forward_dropout = BertDropout(dropout, dtype=policy)

    @property
    def attention_width(self):
        """N * Dh: the width of the concatenated heads (hidden_dim unless pruned)."""
        return self.num_heads * self._head_dim

    def build(self, x_shape, context_shape=None, positions_shape=None):
        x_shape = tuple(x_shape)
        if self.attention_norm is not None:
            self.attention_norm.build(x_shape)
        self.qkv.build(x_shape)
        self.attention_output.build(x_shape[:-1] + (self.attention_width,))
        self.feed_forward_norm.build(x_shape)
        self.feed_forward_input.build(x_shape)
        self.feed_forward_output.build(x_shape[:-1] + (self.intermediate_dim,))
        self.built = True

    def call(self, x, context, training=None, positions=None):
        """`context`: the encoder's (`pieces.block_context`). `positions` [B, Q]: the output
        at these rows only ([B, Q, H]; computed at every row, then gathered)."""
        x = modernbert_block.block(x, _Sublayers(self, context, training), 0 if self.first else 1)
        return x if positions is None else gather_rows(x, positions)

    def intermediate_activations(self, x, context):
        """GeGLU(W_i LN(x')) [B, T, I] (x' after the attention sublayer), without dropout:
        what neuron pruning scores by."""
        x = ops.convert_to_tensor(x, dtype=self.compute_dtype)
        parts = _Sublayers(self, context, False)
        normed = x if self.first else parts.norm("attention_norm", x)
        x = x + parts.attention(normed)
        return modernbert_block.feed_forward_hidden(parts.norm("feed_forward_norm", x), parts)

    def queries_keys_values(self, x):
        """{"q", "k", "v"}: the attention's projections of LN(x) (before the rotation), heads
        concatenated -> [B, T, N * Dh] each (MiniLM distillation's relations)."""
        if self.attention_norm is not None:
            x = self.attention_norm(x)
        qkv = self.qkv(x)  # [B, T, 3, N, Dh]
        batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
        parts = ops.split(ops.reshape(qkv, (batch, length, 3, self.attention_width)), 3, axis=2)
        return {name: ops.squeeze(part, axis=2) for name, part in zip("qkv", parts)}

    def compute_output_shape(self, x_shape, context_shape=None, positions_shape=None):
        if positions_shape is not None:
            return tuple(positions_shape) + (x_shape[-1],)
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads, hidden_dim=self.hidden_dim,
            intermediate_dim=self.intermediate_dim, attention=self.attention,
            radius=self.radius, first=self.first, dropout=self.dropout,
            layer_norm_epsilon=self.layer_norm_epsilon,
            initializer_range=self.initializer_range, head_dim=self.head_dim,
            activation=self.activation)
        return config


class _Sublayers(KerasParts):
    """A ModernBertBlock's sublayers under the names `modernbert_block.block` calls them by."""

    def __init__(self, block, context, training):
        super().__init__(block, {"feed_forward_input": block.feed_forward_input,
                                 "feed_forward_output": block.feed_forward_output}, training)
        self.context = context

    def attention(self, x):
        block, context = self.block, self.context
        qkv = block.qkv(x)  # [B, T, 3, N, Dh]
        batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
        qkv = ops.reshape(qkv, (batch, length, 3 * block.attention_width))
        kind = block.attention
        cos, sin = context[f"{kind}_cos"], context[f"{kind}_sin"]
        dropout = None
        if self.training and block.dropout > 0:
            def dropout(probs):
                return block.probs_dropout(probs, training=self.training)
        static_length = x.shape[1]
        if kind == "local" and (static_length is None or static_length > 2 * block.radius):
            def attend(query, key, value):
                return windowed_attention(query, key, value, context["padding_mask"],
                                          block.radius, dtype=block.compute_dtype,
                                          dropout=dropout)
        elif kind == "global" and dropout is None:
            def attend(query, key, value):  # a block of query rows at a time on long inputs
                return query_blocked_attention(query, key, value, context["keep"],
                                               dtype=block.compute_dtype)
        else:
            keep = context["keep"]
            if kind == "local":
                keep = ops.logical_and(keep, band(length, block.radius)[None, None])

            def attend(query, key, value):
                return masked_attention(query, key, value, keep, dtype=block.compute_dtype,
                                        dropout=dropout)
        context_rows = modernbert_block.rotary_attention(qkv, cos, sin, attend, block.num_heads)
        return block.attention_output(context_rows)
