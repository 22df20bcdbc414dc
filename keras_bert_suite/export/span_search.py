"""In-graph best-span search for extractive QA (the original BERT's rule, all windows at once).

A span (start <= end < start + max_answer_tokens, both inside the context part of the window)
scores start_logit + end_logit; the answer is the best span over all windows of an example.
"""

import tensorflow as tf

NO_ANSWER_SCORE = float(tf.float32.min)  # finite, so it survives JSON (REST) encoding


def best_spans(start_logits, end_logits, context_begin, context_length, max_answer_tokens):
    """start_logits, end_logits: [N, T]; context_begin, context_length: [N] int64 (where the
    context tokens sit in each packed window). Returns per window (score [N] float32,
    start [N] int64, end [N] int64) as token indices into the window's context part; windows
    without context tokens score NO_ANSWER_SCORE."""
    start_logits = tf.cast(start_logits, tf.float32)
    end_logits = tf.cast(end_logits, tf.float32)
    length = tf.shape(start_logits, out_type=tf.int64)[1]
    positions = tf.range(length)  # [T]
    in_context = ((positions[None, :] >= context_begin[:, None])
                  & (positions[None, :] < (context_begin + context_length)[:, None]))  # [N, T]
    ends = positions[:, None] + tf.range(max_answer_tokens, dtype=tf.int64)[None, :]  # [T, L]
    ends_clamped = tf.minimum(ends, length - 1)
    end_band = tf.gather(end_logits, ends_clamped, axis=1)  # [N, T, L]
    valid = (in_context[:, :, None] & tf.gather(in_context, ends_clamped, axis=1)
             & (ends < length)[None, :, :])  # [N, T, L]
    scores = tf.where(valid, start_logits[:, :, None] + end_band, NO_ANSWER_SCORE)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [N, T * L]
    best = tf.argmax(flat, axis=1)  # [N]
    score = tf.reduce_max(flat, axis=1)
    start = best // max_answer_tokens
    end = start + best % max_answer_tokens
    return score, start - context_begin, end - context_begin


def best_window(window_scores, row_splits):
    """window_scores [N], row_splits [B + 1] -> [B] index (into N) of each example's best
    window (the first one on ties)."""
    per_example = tf.RaggedTensor.from_row_splits(window_scores, row_splits)
    padded = per_example.to_tensor(NO_ANSWER_SCORE)  # every example has >= 1 window
    return row_splits[:-1] + tf.argmax(padded, axis=1)
