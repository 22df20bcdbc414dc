"""How many tokens of each segment fit a length budget (core TensorFlow ops only).

Both strategies keep, for some level k, min(length, k) tokens of every segment, with k the
largest value whose total fits the budget; they differ only in which segments get one of the
(fewer than #segments) tokens left over:

* "round_robin" (tf-text's RoundRobinTrimmer): segments take one token each in turn, so the
  left-over tokens go to the first segments, in order, that are longer than k.
* "longest_first" (Hugging Face `tokenizers`): tokens are removed from the longest segment
  first, so the left-over tokens go to the longest segments; between equally long ones the
  later segment keeps more, as `tokenizers` splits an odd budget [n // 2, n // 2 + 1].
"""

import tensorflow as tf

STRATEGIES = ("round_robin", "longest_first")


def allocate(lengths, budget, strategy):
    """lengths: [B, S] int32 segment lengths; budget: int (tokens for all segments together).

    Returns [B, S] int32 kept lengths, each <= its length, summing to min(budget, total).
    """
    num_segments = lengths.shape[-1]
    sorted_lengths = tf.sort(lengths, axis=-1)  # [B, S] ascending
    shorter_total = tf.cumsum(sorted_lengths, axis=-1, exclusive=True)  # [B, S]
    remaining = tf.range(num_segments, 0, -1, dtype=lengths.dtype)  # [S]: S, S-1, ..., 1
    # Giving every segment from sorted position j on the same level l_(j) overflows here:
    overflows = shorter_total + remaining * sorted_lengths > budget  # [B, S]
    first = tf.argmax(tf.cast(overflows, tf.int32), axis=-1, output_type=tf.int32)  # [B]
    total_below = tf.gather(shorter_total, first, batch_dims=1)
    level = (budget - total_below) // tf.gather(remaining, first)  # [B]
    level = tf.where(tf.reduce_any(overflows, axis=-1), level, tf.reduce_max(lengths, axis=-1))
    kept = tf.minimum(lengths, level[:, None])  # [B, S]
    leftover = budget - tf.reduce_sum(kept, axis=-1)  # [B], < S when truncating
    cut = lengths > level[:, None]  # [B, S]: segments that could take one more
    kept += tf.cast(cut & (_rank(lengths, cut, strategy) < leftover[:, None]), lengths.dtype)
    return kept


def _rank(lengths, cut, strategy):
    """[B, S]: position of each cut segment in the order that receives left-over tokens."""
    if strategy == "round_robin":
        return tf.cumsum(tf.cast(cut, lengths.dtype), axis=-1, exclusive=True)
    num_segments = lengths.shape[-1]
    index = tf.range(num_segments)
    # Segment j comes before i when longer, or equally long and later.
    other, this = lengths[:, None, :], lengths[:, :, None]  # [B, 1, S(j)], [B, S(i), 1]
    before = (other > this) | ((other == this) & (index[None, :] > index[:, None]))
    before &= cut[:, None, :]  # [B, S(i), S(j)]
    return tf.reduce_sum(tf.cast(before, lengths.dtype), axis=-1)
