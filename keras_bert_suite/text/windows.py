"""In-graph windowing: long piece sequences become several model rows instead of being cut.

Row b of n_b pieces gets windows of at most `window_b` pieces, starting every
`step_b = min(stride, window_b)` pieces until one reaches the end of the row:
`1 + ceil(max(n_b - window_b, 0) / step_b)` windows (an empty row gets one empty window).
That is google-research/bert's `run_squad.py` doc spans (`window_b` depends on the question
length there) and, with stride == window, consecutive chunks. Core TF ops only.
"""

import tensorflow as tf


class Windows:
    """Windows over the rows of a [B, None] ragged tensor.

    Args:
        lengths: [B] row lengths (kept as `lengths`, int64).
        window: the window size, a scalar or [B] (one per row).
        stride: the distance between window starts (at most the window), scalar or [B].

    Attributes (N = total number of windows, every row has at least one):
        example: [N] int64, the row each window comes from.
        first_window: [B] int64, index of each row's first window.
        start, end: [N] int64 piece positions [start, end) of each window in its row.
        row_splits: [B + 1] int64 row splits of the windows per row.
    """

    def __init__(self, lengths, window, stride):
        lengths = tf.cast(lengths, tf.int64)
        self.lengths = lengths
        window = tf.broadcast_to(tf.cast(window, tf.int64), tf.shape(lengths))
        step = tf.minimum(tf.broadcast_to(tf.cast(stride, tf.int64), tf.shape(lengths)), window)
        extra = tf.maximum(lengths - window, 0)
        counts = 1 + (extra + step - 1) // step  # [B]
        index_in_row = tf.ragged.range(counts)  # [B, K]
        self.row_splits = index_in_row.row_splits
        self.first_window = index_in_row.row_splits[:-1]
        self.example = index_in_row.value_rowids()
        self.start = index_in_row.values * tf.gather(step, self.example)
        self.end = tf.minimum(self.start + tf.gather(window, self.example),
                              tf.gather(lengths, self.example))

    def gather(self, tokens):
        """tokens [B, None] ragged -> [N, None] ragged: each window's tokens."""
        return tf.gather(tokens.values, self._flat_positions(tokens.row_splits))

    def max_context(self):
        """[N, None] ragged bool, aligned with `gather`'s output: True where this window is
        the one that gives the piece the most context, min(pieces left, pieces right) +
        0.01 * window length, the first window on ties (run_squad.py's `_check_is_max_context`,
        which keeps one answer start per piece when windows overlap)."""
        positions = tf.ragged.range(self.start, self.end)  # [N, None] piece index in its row
        window = positions.value_rowids()  # [P] the window of each window piece
        start, end = tf.gather(self.start, window), tf.gather(self.end, window)
        piece = positions.values
        context = tf.minimum(piece - start, end - 1 - piece)
        # float64 as the reference's numpy/Python floats, so ties break the same way
        score = tf.cast(context, tf.float64) + 0.01 * tf.cast(end - start, tf.float64)
        row_base = tf.math.cumsum(self.lengths, exclusive=True)  # [B] first piece of each row
        global_piece = tf.gather(row_base, tf.gather(self.example, window)) + piece
        num_pieces = tf.reduce_sum(self.lengths)
        best = tf.math.unsorted_segment_max(score, global_piece, num_pieces)
        candidate = tf.where(tf.equal(score, tf.gather(best, global_piece)), window,
                             tf.int64.max)
        first = tf.math.unsorted_segment_min(candidate, global_piece, num_pieces)
        return positions.with_values(tf.equal(window, tf.gather(first, global_piece)))

    def _flat_positions(self, row_splits):
        base = tf.gather(row_splits, self.example)  # [N] where each row begins
        return tf.ragged.range(self.start + base, self.end + base)  # [N, None]
