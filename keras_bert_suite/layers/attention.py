"""Multi-head self-attention with one fused query/key/value projection, and attention's math
over an ops module (`attend`, `padding_bias`): keras.ops here, TensorFlow's in
the serving graph (`layers/serving/attention.py`)."""

import math

import keras
from keras import ops

from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.lora_dense import FusedQKV, LoraDense
from keras_bert_suite.layers.float_weights import float_kernel
from keras_bert_suite.layers.initializer import BertInitializer


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertSelfAttention(keras.layers.Layer):
    """Self-attention as in "Attention is all you need", section 3.2.2.

    Query, key and value come from one projection (one large matmul instead of three) whose
    kernel is [H, 3, N, Dh]: (query | key | value, head, dimension within the head). Keeping
    the head axis separate lets a model-parallel layout split it, so that each device holds
    whole heads of all three (`BertEncoder.get_layout_map`); in memory it is the [H, 3H]
    query | key | value kernel, so the matmul costs the same. Inference goes through
    `keras.ops.dot_product_attention`, which picks fused kernels where the backend has them;
    training with attention dropout > 0 takes the explicit softmax path because the fused op
    has no dropout on the probabilities.

    Inputs: `x` [B, T, H] and `attention_mask` [B, 1, 1, T] or, one row per query (packed
    rows), [B, 1, T, T] ([B, 1, Q, T] with `queries`), True = attend; optionally
    `queries` [B, Q, H] to compute only Q output rows (the pretrainer's last layer: see
    `BertEncoder.encode_at`).

    `head_dim` (Dh) defaults to hidden_dim // num_heads. A structurally pruned layer
    (`keras_bert_suite.pruning`) keeps the head size of the unpruned model with fewer heads:
    N heads of `head_dim`, a [H, 3, N, Dh] qkv kernel and a [N * Dh, H] output kernel.
    """

    def __init__(self, num_heads, hidden_dim, dropout=0.1, initializer_range=0.02,
                 head_dim=None, **kwargs):
        super().__init__(**kwargs)
        if num_heads < 1 or (head_dim is not None and head_dim < 1):
            raise ValueError(f"num_heads ({num_heads}) and head_dim ({head_dim}) must be at "
                             "least 1.")
        if head_dim is None and hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim ({hidden_dim}) must be divisible by num_heads ({num_heads}).")
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.head_dim = hidden_dim // num_heads if head_dim is None else head_dim

        initializer = BertInitializer(stddev=initializer_range)
        self.qkv = FusedQKV(
            "bth,hcnd->btcnd", output_shape=(None, 3, num_heads, self.head_dim),
            bias_axes="cnd", kernel_initializer=initializer, dtype=self.dtype_policy,
            name="qkv")
        self.output_dense = LoraDense(
            hidden_dim, kernel_initializer=initializer, dtype=self.dtype_policy, name="output")
        self.probs_dropout = BertDropout(dropout, dtype=self.dtype_policy)

    @property
    def attention_dim(self):
        """N * Dh: the width of the concatenated heads (hidden_dim unless pruned)."""
        return self.num_heads * self.head_dim

    def build(self, x_shape, attention_mask_shape=None, queries_shape=None):
        self.qkv.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.attention_dim,))
        self.built = True

    def call(self, x, attention_mask=None, training=None, queries=None):
        """`queries` [B, Q, H]: attend from these rows only (keys and values still come from
        all of `x`); the output is then [B, Q, H]. Defaults to every row of `x`."""
        if queries is None:
            # Split the [B, T, 3, N, Dh] projection rather than index it: an index's gradient
            # writes a zero-filled full-size tensor per slice (TF's StridedSliceGrad was ~10%
            # of a training step), a split's is one concatenation.
            parts = ops.split(self.qkv(x), 3, axis=2)  # 3 x [B, T, 1, N, Dh]
            query, key, value = (ops.squeeze(part, axis=2) for part in parts)  # [B, T, N, Dh]
        else:
            query, key, value = self._project_separately(queries, x)

        if training and self.dropout > 0:
            context = self._attend_with_dropout(query, key, value, attention_mask, training)
        else:
            context = ops.dot_product_attention(query, key, value, mask=attention_mask)
        batch, num_queries = ops.shape(context)[0], ops.shape(context)[1]
        context = ops.reshape(context, (batch, num_queries, self.attention_dim))  # [B, Q, N Dh]
        return self.output_dense(context)

    def _project_separately(self, queries, x):
        """Query [B, Q, N, Dh] from `queries`, key and value [B, T, N, Dh] from `x`, with the
        fused [H, 3, N, Dh] weights (dequantized when the model was quantized)."""
        kernel = ops.cast(float_kernel(self.qkv), self.compute_dtype)
        bias = ops.cast(self.qkv.bias, self.compute_dtype)  # [3, N, Dh]
        query = ops.einsum("bqh,hnd->bqnd", queries, kernel[:, 0]) + bias[0]
        key_value = ops.einsum("bth,hcnd->btcnd", x, kernel[:, 1:]) + bias[1:]
        key, value = (ops.squeeze(part, axis=2) for part in ops.split(key_value, 2, axis=2))
        return query, key, value

    def _attend_with_dropout(self, query, key, value, attention_mask, training):
        def masked(scores):
            return scores if attention_mask is None else ops.where(attention_mask, scores, -1e9)

        def heads_first(x):  # [B, T, N, Dh] <-> [B, N, T, Dh]
            return ops.transpose(x, (0, 2, 1, 3))

        context = attend(heads_first(query), heads_first(key), heads_first(value), masked, ops,
                         self.compute_dtype,
                         dropout=lambda probs: self.probs_dropout(probs, training=training))
        return heads_first(context)  # [B, T, N, Dh]

    def compute_output_shape(self, x_shape, attention_mask_shape=None, queries_shape=None):
        return tuple(queries_shape if queries_shape is not None else x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
            # None when it is hidden_dim // num_heads: unpruned configs read as they always did.
            head_dim=None if self._default_head_dim() else self.head_dim,
        )
        return config

    def _default_head_dim(self):
        return not self.hidden_dim % self.num_heads and (
            self.head_dim == self.hidden_dim // self.num_heads)


# === Attention's math, over an ops module ===

def attend(query, key, value, masked, ops=ops, dtype="float32", dropout=None):
    """Scaled dot-product attention ("Attention is all you need", 3.2.1): query [B, N, Q, Dh],
    key and value [B, N, T, Dh] -> the context [B, N, Q, Dh] (heads first: both products are
    batched matmuls without a transpose).

    masked(scores [B, N, Q, T]) -> the scores with the keys a query may not see at -1e9 (or
    -1e9 added): exp then underflows to exactly 0. The softmax runs in float32, so that masked
    positions and bf16/fp16 policies stay exact enough; `dtype` is the probabilities' after
    it; `dropout(probabilities)` while training."""
    scores = ops.einsum("bnqd,bntd->bnqt", query, key)  # [B, N, Q, T]
    scores = masked(ops.cast(scores, "float32") * (1.0 / math.sqrt(query.shape[-1])))
    probs = ops.cast(ops.softmax(scores, axis=-1), dtype)
    if dropout is not None:
        probs = dropout(probs)
    return ops.einsum("bnqt,bntd->bnqd", probs, value)  # [B, N, Q, Dh]


def padding_bias(padding_mask, ops=ops):
    """[B, T] 0/1 padding mask -> [B, 1, 1, T]: -1e9 on padded keys, to add to the scores."""
    return (1.0 - ops.cast(padding_mask, "float32"))[:, None, None, :] * -1e9
