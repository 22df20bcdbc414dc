"""Rotary position embedding (RoFormer, Su et al. 2021) as ModernBERT applies it to queries and
keys, written once over an ops module (keras.ops in training, TensorFlow's in the serving graph).

Each pair (x[d], x[d + Dh/2]) of a head's Dh dimensions is rotated by the angle
position · theta^(-2d / Dh): transformers' "rotate_half" convention, which pairs a dimension
with the one half a head away (not with its neighbour, as RoFormer's paper writes it).
"""

import numpy as np
from keras import ops


def inverse_frequencies(head_dim, theta):
    """[Dh / 2] float32: theta^(-2d / Dh) for d = 0 .. Dh/2 - 1, the angle each pair turns per
    position. Computed once in numpy, as a constant: every backend rotates by the same angles."""
    exponents = np.arange(0, head_dim, 2, dtype="float32") / np.float32(head_dim)
    return (1.0 / np.power(np.float32(theta), exponents)).astype("float32")


def rotary_angles(positions, frequencies, ops=ops):
    """cos and sin [.., T, Dh] float32 of `positions` ([T] or [B, T] integers; packed rows
    restart them) times `frequencies` ([Dh / 2]), each half of Dh repeating the other."""
    angles = ops.cast(positions, "float32")[..., None] * frequencies  # [.., T, Dh/2]
    angles = ops.concatenate([angles, angles], axis=-1)  # [.., T, Dh]
    return ops.cos(angles), ops.sin(angles)


def rotate(x, cos, sin, ops=ops):
    """x [B, T, N, Dh] rotated by its positions' angles (cos, sin: [T, Dh] or [B, T, Dh]):
    x · cos + rotate_half(x) · sin, in float32 and back to x's dtype."""
    dtype = x.dtype
    x = ops.cast(x, "float32")
    first, second = ops.split(x, 2, axis=-1)  # 2 x [B, T, N, Dh/2]
    rotated_half = ops.concatenate([-second, first], axis=-1)
    cos, sin = cos[..., None, :], sin[..., None, :]  # [.., T, 1, Dh]: the same for every head
    return ops.cast(x * cos + rotated_half * sin, dtype)
