"""Multi-head self-attention with one fused query/key/value projection."""

import keras
from keras import ops

from keras_bert_suite.layers.dropout import BertDropout


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertSelfAttention(keras.layers.Layer):
    """Self-attention as in "Attention is all you need", section 3.2.2.

    Query, key and value come from one [H, 3H] projection (one large matmul instead of
    three). Inference goes through `keras.ops.dot_product_attention`, which picks fused
    kernels where the backend has them; training with attention dropout > 0 takes the
    explicit softmax path because the fused op has no dropout on the probabilities.

    Inputs: `x` [B, T, H] and `attention_mask` [B, 1, 1, T] (True = attend); optionally
    `queries` [B, Q, H] to compute only Q output rows (the pretrainer's last layer: see
    `BertEncoder.encode_at`).
    """

    def __init__(self, num_heads, hidden_dim, dropout=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim ({hidden_dim}) must be divisible by num_heads ({num_heads}).")
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.head_dim = hidden_dim // num_heads

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.qkv = keras.layers.Dense(
            3 * hidden_dim, kernel_initializer=initializer, dtype=self.dtype_policy, name="qkv")
        self.output_dense = keras.layers.Dense(
            hidden_dim, kernel_initializer=initializer, dtype=self.dtype_policy, name="output")
        self.probs_dropout = BertDropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape, attention_mask_shape=None, queries_shape=None):
        self.qkv.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, x, attention_mask=None, training=None, queries=None):
        """`queries` [B, Q, H]: attend from these rows only (keys and values still come from
        all of `x`); the output is then [B, Q, H]. Defaults to every row of `x`."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        if queries is None:
            # Split the [B, T, 3H] projection rather than index a [B, T, 3, N, Dh] view: an
            # index's gradient writes a zero-filled full-size tensor per slice (TF's
            # StridedSliceGrad was ~10% of a training step), a split's is one concatenation.
            query, key, value = ops.split(self.qkv(x), 3, axis=-1)
            num_queries = length
        else:
            query, key, value = self._project_separately(queries, x)
            num_queries = ops.shape(queries)[1]
        query = ops.reshape(query, (batch, num_queries, self.num_heads, self.head_dim))
        key, value = (ops.reshape(part, (batch, length, self.num_heads, self.head_dim))
                      for part in (key, value))  # [B, T, N, Dh]

        if training and self.dropout > 0:
            context = self._attend_with_dropout(query, key, value, attention_mask, training)
        else:
            context = ops.dot_product_attention(query, key, value, mask=attention_mask)
        context = ops.reshape(context, (batch, num_queries, self.hidden_dim))  # [B, Q, H]
        return self.output_dense(context)

    def _project_separately(self, queries, x):
        """Query from `queries`, key and value from `x`, with the fused [H, 3H] weights."""
        kernel = ops.cast(self.qkv.kernel, self.compute_dtype)
        bias = ops.cast(self.qkv.bias, self.compute_dtype)
        hidden = self.hidden_dim
        query = ops.matmul(queries, kernel[:, :hidden]) + bias[:hidden]
        key_value = ops.matmul(x, kernel[:, hidden:]) + bias[hidden:]
        key, value = ops.split(key_value, 2, axis=-1)
        return query, key, value

    def _attend_with_dropout(self, query, key, value, attention_mask, training):
        scores = ops.einsum("btnh,bsnh->bnts", query, key)  # [B, N, T, S]
        # Softmax in float32 so that masked positions and bf16/fp16 policies stay exact enough.
        scores = ops.cast(scores, "float32") * (1.0 / self.head_dim**0.5)
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, -1e9)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.probs_dropout(probs, training=training)
        return ops.einsum("bnts,bsnh->btnh", probs, value)  # [B, T, N, Dh]

    def compute_output_shape(self, x_shape, attention_mask_shape=None, queries_shape=None):
        return tuple(queries_shape if queries_shape is not None else x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
        )
        return config
