"""Row gathering shared by the layers that compute or read only some positions."""

from keras import ops


def gather_rows(x, positions):
    """x [B, T, H] and integer positions [B, Q] -> x's rows at those positions, [B, Q, H]."""
    return ops.take_along_axis(x, ops.cast(positions, "int32")[:, :, None], axis=1)
