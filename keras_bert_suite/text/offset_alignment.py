"""Maps byte offsets in normalized text back to byte offsets in the original text.

Every original character normalizes on its own to zero or more bytes (`NormalizedChars`), so a
normalized byte belongs to exactly one original character. A piece starts where the character
holding its first byte starts and ends where the character holding its last byte ends; like the
reference's alignments, pieces inside one character that expanded (a Hangul syllable becomes
several jamo under NFD) all get that character's span, and a dropped character (an accent
stripped from "e\u0301") is covered by no piece unless it sits between two kept characters of
the same piece. An empty piece gets an empty span where its character starts.
"""

import tensorflow as tf

from keras_bert_suite.text import ragged_rows


def to_original_offsets(starts, ends, normalized):
    """starts, ends: [B, T] ragged byte offsets into each normalized row (`reduce_join` of
    `normalized.chars`); returns the same offsets into the original strings."""
    lengths = tf.cast(tf.strings.length(normalized.chars.values, unit="BYTE"), tf.int64)
    char_ends = tf.cumsum(lengths)  # [N] normalized end of every character, across the batch
    row_base = tf.gather(tf.concat([[0], char_ends], axis=0), normalized.chars.row_splits[:-1])
    base = tf.gather(row_base, ragged_rows.value_rowids(starts))  # [P] each piece's row start
    first_byte = tf.cast(starts.values, tf.int64) + base
    last_byte = tf.cast(ends.values, tf.int64) - 1 + base
    first_char = tf.searchsorted(char_ends, first_byte, side="right", out_type=tf.int64)
    last_char = tf.searchsorted(char_ends, last_byte, side="right", out_type=tf.int64)
    new_starts = tf.gather(normalized.starts.values, first_char)
    # An empty piece (SentencePiece's lone "▁" before a word) stays empty, at its start.
    new_ends = tf.where(last_byte < first_byte, new_starts,
                        tf.gather(normalized.ends.values, last_char))
    return starts.with_values(new_starts), ends.with_values(new_ends)
