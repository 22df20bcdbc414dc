"""Byte-pair merging in TensorFlow ops: words as symbol sequences -> BPE pieces.

Each step merges, in every word at once, the adjacent pair with the lowest merge rank, at all
its non-overlapping places from the left. For merge lists learned by BPE (a merge's parts are
made by earlier merges) that is exactly `tokenizers`' one-merge-at-a-time priority queue:
merges made in the same step share a rank, and each new pair ranks after the pair that made
it. A word of n symbols needs at most n - 1 steps, usually about a dozen; the loop ends when no
word has a mergeable pair. There is no cache: identical words of a batch are merged once
(`tf.unique`), and nothing grows inside a served model.
"""

import tensorflow as tf

from keras_bert_suite.text import runs

NO_MERGE = tf.int32.max


class PairRanks:
    """merges ("a b" strings, best first) -> a lookup of each pair's rank."""

    def __init__(self, merges):
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(merges, tf.string), tf.range(len(merges), dtype=tf.int32)),
            default_value=NO_MERGE)

    def merge(self, symbols):
        """symbols: [W, None] ragged strings (one character per byte) -> [W, None] pieces."""
        values, lengths = tf.while_loop(
            lambda values, lengths, more: more,
            lambda values, lengths, more: self._step(values, lengths),
            (symbols.values, symbols.row_lengths(), tf.constant(True)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]),
                              tf.TensorShape([])))[:2]
        return tf.RaggedTensor.from_row_lengths(values, lengths)

    def _step(self, values, lengths):
        words = tf.RaggedTensor.from_row_lengths(values, lengths)  # [W, S]
        left, right = words[:, :-1], words[:, 1:]  # [W, S - 1]: each adjacent pair
        ranks = left.with_values(self.table.lookup(
            tf.strings.join([left.values, right.values], separator=" ")))
        best = tf.reduce_min(ranks, axis=1)  # [W]; NO_MERGE for words with nothing to merge
        take = ((ranks == tf.expand_dims(best, 1)) & tf.expand_dims(best < NO_MERGE, 1)).values

        # In a run of equal pairs ("a a a" with merge "a a") take every other one, from the left.
        pair_row = left.value_rowids()
        index = tf.range(tf.size(take, out_type=tf.int64))
        take = runs.every_other_in_runs(
            take, tf.concat([[False], tf.equal(pair_row[1:], pair_row[:-1])], axis=0))

        # Pair p of word w joins symbols p + w and p + w + 1 (a word has one pair fewer).
        symbol = tf.boolean_mask(index + pair_row, take)[:, None]
        size = tf.shape(values, out_type=tf.int64)
        joins_next = tf.scatter_nd(symbol, tf.ones_like(symbol[:, 0], tf.bool), size)
        joined = tf.scatter_nd(symbol + 1, tf.ones_like(symbol[:, 0], tf.bool), size)
        following = tf.concat([values[1:], [""]], axis=0)
        merged = tf.boolean_mask(
            tf.where(joins_next, tf.strings.join([values, following]), values), ~joined)
        merges_per_word = tf.math.bincount(tf.cast(tf.boolean_mask(pair_row, take), tf.int32),
                                           minlength=tf.size(lengths), dtype=tf.int64)
        return merged, lengths - merges_per_word, tf.reduce_any(take)
