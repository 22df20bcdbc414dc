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

from keras_bert_suite.text import ragged_rows
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
            (symbols.values, tf.cast(symbols.row_lengths(), tf.int64), tf.constant(True)),
            shape_invariants=(tf.TensorShape([None]), tf.TensorShape([None]),
                              tf.TensorShape([])))[:2]
        return tf.RaggedTensor.from_row_lengths(values, lengths)

    def _step(self, values, lengths):
        """One merge in every word, on the flat symbols [S] of words of `lengths` [W]."""
        word = ragged_rows.rowids_from_splits(
            tf.concat([[0], tf.cumsum(lengths)], axis=0))  # [S] the word of each symbol
        # Pair p joins symbols p and p + 1 of one word.
        in_word = tf.equal(word[1:], word[:-1])  # [S - 1]
        pair = tf.where(in_word)[:, 0]  # [P] its first symbol
        pair_word = tf.gather(word, pair)
        ranks = self.table.lookup(tf.strings.join(
            [tf.gather(values, pair), tf.gather(values, pair + 1)], separator=" "))
        best = tf.math.unsorted_segment_min(ranks, pair_word, tf.size(lengths))  # [W]
        take = tf.equal(ranks, tf.gather(best, pair_word)) & (ranks < NO_MERGE)  # [P]
        # In a run of equal pairs ("a a a" with merge "a a") take every other one, from the
        # left: pairs of one run are adjacent in `pair` and in the same word.
        take = runs.every_other_in_runs(
            take, tf.concat([[False], tf.equal(pair[1:], pair[:-1] + 1)], axis=0))

        symbol = tf.boolean_mask(pair, take)[:, None]
        size = tf.shape(values, out_type=tf.int64)
        joins_next = tf.scatter_nd(symbol, tf.ones_like(symbol[:, 0], tf.bool), size)
        joined = tf.scatter_nd(symbol + 1, tf.ones_like(symbol[:, 0], tf.bool), size)
        following = tf.concat([values[1:], [""]], axis=0)
        merged = tf.boolean_mask(
            tf.where(joins_next, tf.strings.join([values, following]), values), ~joined)
        merges_per_word = tf.math.unsorted_segment_sum(
            tf.cast(take, tf.int64), pair_word, tf.size(lengths))
        return merged, lengths - merges_per_word, tf.reduce_any(take)
