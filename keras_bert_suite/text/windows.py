"""In-graph windowing: long token sequences become several model rows instead of being cut.

A row of `n` tokens becomes `1 + ceil(max(n - window, 0) / stride)` windows of at most
`window` tokens starting every `stride` tokens (stride == window: consecutive chunks;
stride < window: overlapping windows, as BERT's SQuAD `doc_stride`). Core TF ops only.
"""

import tensorflow as tf


class Windows:
    """Windows over the rows of a [B, None] ragged tensor.

    Attributes (N = total number of windows, every example has at least one):
        example: [N] int64, the row each window comes from.
        first_window: [B] int64, index of each row's first window (row_splits[:-1]).
        start, end: [N] int64 token positions [start, end) of each window in its row.
        row_splits: [B + 1] int64 row splits of the windows per example.
    """

    def __init__(self, lengths, window, stride):
        lengths = tf.cast(lengths, tf.int64)
        extra = tf.maximum(lengths - window, 0)
        counts = 1 + (extra + stride - 1) // stride  # [B]
        starts = tf.ragged.range(counts) * stride  # [B, K]
        self.row_splits = starts.row_splits
        self.first_window = starts.row_splits[:-1]
        self.example = starts.value_rowids()
        self.start = starts.values
        self.end = tf.minimum(self.start + window, tf.gather(lengths, self.example))

    def gather(self, tokens):
        """tokens [B, None] ragged -> [N, None] ragged: each window's tokens."""
        base = tf.gather(tokens.row_splits, self.example)  # [N] where each row begins
        positions = tf.ragged.range(self.start + base, self.end + base)  # [N, None]
        return tf.gather(tokens.values, positions)


def sanitize_utf8(text):
    """Replaces every ill-formed UTF-8 sequence by U+FFFD (the tokenizer's own rule), so byte
    offsets, substrings and character counts are taken on the same valid string."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD,
        replace_control_characters=False)


def byte_to_char_offset(text, byte_offset):
    """text [B] valid UTF-8, byte_offset [B] -> [B] int64 character (code point) offsets."""
    prefix = tf.strings.substr(text, tf.zeros_like(byte_offset), byte_offset, unit="BYTE")
    return tf.cast(tf.strings.length(prefix, unit="UTF8_CHAR"), tf.int64)
