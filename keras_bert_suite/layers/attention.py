"""Multi-head self-attention with one fused query/key/value projection."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertSelfAttention(keras.layers.Layer):
    """Self-attention as in "Attention is all you need", section 3.2.2.

    Query, key and value come from one [H, 3H] projection (one large matmul instead of
    three). Inference goes through `keras.ops.dot_product_attention`, which picks fused
    kernels where the backend has them; training with attention dropout > 0 takes the
    explicit softmax path because the fused op has no dropout on the probabilities.

    Inputs: `x` [B, T, H] and `attention_mask` [B, 1, 1, T] (True = attend).
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
        self.probs_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape, attention_mask_shape=None):
        self.qkv.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, x, attention_mask=None, training=None):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        # Split the [B, T, 3H] projection rather than index a [B, T, 3, N, Dh] view: an
        # index's gradient writes a zero-filled full-size tensor per slice (TF's
        # StridedSliceGrad was ~10% of a training step), a split's is one concatenation.
        query, key, value = (
            ops.reshape(part, (batch, length, self.num_heads, self.head_dim))  # [B, T, N, Dh]
            for part in ops.split(self.qkv(x), 3, axis=-1))

        if training and self.dropout > 0:
            context = self._attend_with_dropout(query, key, value, attention_mask, training)
        else:
            context = ops.dot_product_attention(query, key, value, mask=attention_mask)
        context = ops.reshape(context, (batch, length, self.hidden_dim))  # [B, T, H]
        return self.output_dense(context)

    def _attend_with_dropout(self, query, key, value, attention_mask, training):
        scores = ops.einsum("btnh,bsnh->bnts", query, key)  # [B, N, T, S]
        # Softmax in float32 so that masked positions and bf16/fp16 policies stay exact enough.
        scores = ops.cast(scores, "float32") * (1.0 / self.head_dim**0.5)
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, -1e9)
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probs = self.probs_dropout(probs, training=training)
        return ops.einsum("bnts,bsnh->btnh", probs, value)  # [B, T, N, Dh]

    def compute_output_shape(self, x_shape, attention_mask_shape=None):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_dim=self.hidden_dim,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
        )
        return config
