"""Word-level view of tokenizer output: which pieces start a word, and each word's text."""

import tensorflow as tf


def word_starts(ids, tokenizer):
    """ids [B, None] ragged -> [B, None] bool: True where a piece begins a word by the
    tokenizer's rule ("##" continues a WordPiece word, "Ġ" / "▁" begin BPE / SentencePiece
    words); the first piece of a row always does."""
    continuation = tf.constant(~tokenizer.word_start_flags())
    first_in_row = tf.ragged.range(ids.row_lengths()) == 0
    return ids.with_values(~tf.gather(continuation, ids.values) | first_in_row.values)


def group_words(starts_word, piece_starts, piece_ends):
    """Pieces -> words. starts_word, piece_starts, piece_ends: [B, None] ragged.

    Returns (word_of_piece [P] int64 index of each piece's word over the whole batch,
    word_row [W] int64 the example of each word, word_begin [W], word_end [W] byte offsets).
    """
    first = starts_word.values
    word_of_piece = tf.cumsum(tf.cast(first, tf.int64)) - 1  # [P]
    num_words = tf.reduce_sum(tf.cast(first, tf.int64))
    first_index = tf.where(first)[:, 0]  # [W] piece index of each word's first piece
    word_row = tf.gather(starts_word.value_rowids(), first_index)
    word_begin = tf.gather(piece_starts.values, first_index)
    word_end = tf.math.unsorted_segment_max(piece_ends.values, word_of_piece, num_words)
    return word_of_piece, word_row, word_begin, word_end
