"""Layer normalization (Ba et al. 2016) over the last axis, written once over an ops module, with
or without the offset: ModernBERT's norms have none (transformers' `norm_bias` false)."""

from keras import ops


def layer_norm(x, scale, offset=None, epsilon=1e-5, ops=ops):
    """(x - mean) / sqrt(variance + epsilon) · scale (+ offset), the statistics over the last
    axis in float32 (bf16 inputs keep their precision there), the result in x's dtype."""
    dtype = x.dtype
    x = ops.cast(x, "float32")
    centered = x - ops.mean(x, axis=-1, keepdims=True)
    variance = ops.mean(ops.square(centered), axis=-1, keepdims=True)
    normalized = centered * ops.rsqrt(variance + epsilon) * ops.cast(scale, "float32")
    if offset is not None:
        normalized = normalized + ops.cast(offset, "float32")
    return ops.cast(normalized, dtype)
