"""Packed rows: several instances share one row, told apart by the padding mask's values.

`padding_mask` [B, T] is 0 on padding and, on a real token, the number (1, 2, ... K) of the
instance it belongs to, as Graphcore's packed BERT does; an ordinary mask is the one-instance
case (all real tokens 1). Each instance is one contiguous run of its number. For a 0/1 mask
everything below gives exactly what an unpacked encoder always computed.

    padding_mask  [[1, 1, 1, 2, 2, 0]]
    attention     a token sees the real tokens of its own instance (padding sees every real one)
    positions     [[0, 1, 2, 0, 1, 5]]   restarted per instance (padding keeps its index)
    starts (K=3)  [[0, 3, 0]]            each instance's first token ([CLS]); 0 for none
"""

from keras import ops


def _instances(padding_mask):
    return ops.cast(padding_mask, "int32")  # [B, T]


def attention_mask(padding_mask, causal=False):
    """[B, T] padding mask -> [B, 1, T, T] booleans (True = query t attends to key s): the
    key is a real token and in the query's instance, or the query is padding (its output
    is never read; for a 0/1 mask every row is then the key padding mask). `causal`: and
    the key is not after the query (a left-to-right LM; instances are contiguous, so the
    keys left are the query's own instance up to itself)."""
    instances = _instances(padding_mask)
    query, key = instances[:, :, None], instances[:, None, :]  # [B, T, 1], [B, 1, T]
    # ops.equal, not ==: a symbolic KerasTensor compares by identity.
    visible = ops.logical_or(ops.equal(key, query), ops.equal(query, 0))
    if causal:
        # Each token's index from a cumsum: the length is unknown while Keras builds the graph.
        index = ops.cumsum(ops.ones_like(instances), axis=1)  # [B, T]
        not_later = ops.less_equal(index[:, None, :], index[:, :, None])  # [B, T, T]: s <= t
        visible = ops.logical_and(visible, not_later)
    return ops.logical_and(ops.greater(key, 0), visible)[:, None]  # [B, 1, T, T]


def tokens_before_in_instance(padding_mask):
    """[B, T] for each token, how many tokens of its own instance come before it (for
    padding: how many padding tokens)."""
    instances = _instances(padding_mask)
    length = ops.shape(instances)[1]
    index = ops.arange(length, dtype="int32")
    earlier = ops.less(index[None, :], index[:, None])  # [T, T]: key s before query t
    same = ops.equal(instances[:, :, None], instances[:, None, :])  # [B, T, T]
    return ops.sum(ops.cast(ops.logical_and(same, earlier[None]), "int32"), axis=-1)  # [B, T]


def positions(padding_mask):
    """[B, T] BERT's position of every token: its index within its instance (restarted per
    instance), and its row index for padding; a 0/1 mask gives 0 .. T-1 everywhere."""
    instances = _instances(padding_mask)
    real = ops.cast(ops.greater(instances, 0), "int32")
    real_before = ops.cumsum(real, axis=1) - real  # [B, T] real tokens before t
    # Real tokens before t that belong to other instances: 0 unless the row is packed.
    other_instances = real_before - tokens_before_in_instance(instances)
    index = ops.arange(ops.shape(instances)[1], dtype="int32")[None, :]
    return index - real * other_instances


def instance_starts(padding_mask, max_instances):
    """[B, K] the position of each instance's first token (its [CLS]), K = max_instances;
    0 for an instance number the row does not have."""
    instances = _instances(padding_mask)
    numbers = ops.arange(1, max_instances + 1, dtype="int32")  # [K]
    is_instance = ops.cast(ops.equal(instances[:, None, :], numbers[None, :, None]),
                           "int32")  # [B, K, T]
    return ops.cast(ops.argmax(is_instance, axis=-1), "int32")  # first True (0 when none)
