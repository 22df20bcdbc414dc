"""The attention softmax over the keys a query may see, written once over an ops module."""

from keras import ops

# What a hidden key's score becomes: exp(-1e9 - max) underflows to exactly 0 in float32.
HIDDEN_SCORE = -1e9


def masked_softmax(scores, keep, ops=ops):
    """softmax over the last axis of float32 `scores` where `keep` (bool, broadcast to the
    scores' shape) is True; hidden keys get probability 0. A row that sees no key at all (a
    padded query far from any token) gets a uniform, finite row, never NaN."""
    return ops.softmax(ops.where(keep, scores, HIDDEN_SCORE), axis=-1)
