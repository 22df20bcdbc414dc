"""Span logits of every window -> one answer per question, in the graph (TF ops only).

A span (start <= end < start + max_answer_length pieces, both in the context part of the
window, the start in the window that gives it the most context) scores start_logit +
end_logit; the answer is the best span over all windows of the question, cut from the
context by the pieces' byte offsets (the context as written: case, accents and spacing kept,
no detokenization).

SQuAD 2.0 (`version_2_with_negative=True`): the null score is start_logit + end_logit at
[CLS] in the window where that is lowest; the answer is "" when null score - best span score >
`null_score_diff_threshold`, or when no span is valid.

As google-research/bert's `write_predictions` (and Model Garden's `postprocess_output`), only
each window's `n_best_size` best starts and best ends are paired, and ties go to the earlier
window, start and end, so the chosen answer is the reference's. Not produced: the
reference's n-best list, and its "empty" placeholder (here "") for a question without any
valid span.
"""

import tensorflow as tf

from keras_bert_suite.text.utf8 import byte_to_char_offset

NO_ANSWER_SCORE = float(tf.float32.min)  # finite, so it survives JSON (REST) encoding


def best_answers(windows, start_logits, end_logits, max_answer_length=30, n_best_size=20,
                 version_2_with_negative=False, null_score_diff_threshold=0.0):
    """`SpanWindows` and the model's [N, T] logits -> per question [B]: answer (str), start /
    end (int64 character offsets, answer == context[start:end]), score (float32, the span's
    start + end logit; NO_ANSWER_SCORE when no span is valid) and null_score_diff (float32,
    SQuAD 2.0's null score - best span score; tune the threshold on it)."""
    for name, value in (("max_answer_length", max_answer_length),
                        ("n_best_size", n_best_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
    # float64 sums, as the reference adds Python floats
    start_logits = tf.cast(start_logits, tf.float64)
    end_logits = tf.cast(end_logits, tf.float64)
    score, start, end = _best_span_per_window(windows, start_logits, end_logits,
                                              max_answer_length, n_best_size)
    best = _best_window(score, windows.row_splits)  # [B] index into the windows
    score = tf.gather(score, best)
    found = score > NO_ANSWER_SCORE
    null = tf.math.segment_min(start_logits[:, 0] + end_logits[:, 0], windows.example)  # [B]
    null_diff = null - tf.where(found, score, 0.0)
    answered = found
    if version_2_with_negative:
        answered = found & (null_diff <= null_score_diff_threshold)
    # the answer's first and last piece, as indices into the batch's flat context pieces
    base = tf.gather(windows.piece_byte_start.row_splits, tf.gather(windows.example, best))
    first_piece = base + tf.gather(windows.piece_start, best) - tf.gather(windows.context_begin,
                                                                          best)
    begin_piece = tf.where(answered, first_piece + tf.gather(start, best), 0)
    end_piece = tf.where(answered, first_piece + tf.gather(end, best), 0)
    begin = tf.where(answered, tf.gather(_padded(windows.piece_byte_start.values), begin_piece),
                     0)
    end_byte = tf.where(answered, tf.gather(_padded(windows.piece_byte_end.values), end_piece),
                        0)
    context = windows.context
    return {"answer": tf.strings.substr(context, begin, end_byte - begin, unit="BYTE"),
            "start": byte_to_char_offset(context, begin),
            "end": byte_to_char_offset(context, end_byte),
            "score": tf.cast(tf.where(found, score, NO_ANSWER_SCORE), tf.float32),
            "null_score_diff": tf.cast(null_diff, tf.float32)}


def _best_span_per_window(windows, start_logits, end_logits, max_answer_length, n_best_size):
    """(score [N] float64, start [N], end [N] int64 positions in the packed window) of each
    window's best valid span among its n-best starts x n-best ends; NO_ANSWER_SCORE where the
    window has none."""
    length = tf.shape(start_logits)[1]
    positions = tf.range(tf.cast(length, tf.int64))  # [T]
    begin = windows.context_begin[:, None]
    in_context = ((positions[None, :] >= begin)
                  & (positions[None, :] < begin + windows.context_length[:, None]))  # [N, T]
    can_start = in_context & windows.is_max_context
    k = tf.minimum(n_best_size, length)
    # top_k puts the lower position first among equal logits, as the reference's stable sort
    start_top, start_index = tf.math.top_k(start_logits, k)  # [N, K]
    end_top, end_index = tf.math.top_k(end_logits, k)  # [N, K]
    start_index = tf.cast(start_index, tf.int64)[:, :, None]  # [N, K, 1]
    end_index = tf.cast(end_index, tf.int64)[:, None, :]  # [N, 1, K]
    valid = (tf.gather(can_start, start_index, batch_dims=1)
             & tf.gather(in_context, end_index, batch_dims=1)
             & (end_index >= start_index)
             & (end_index - start_index < max_answer_length))  # [N, K, K]
    scores = tf.where(valid, start_top[:, :, None] + end_top[:, None, :], NO_ANSWER_SCORE)
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])  # [N, K * K] start-major
    best = tf.argmax(flat, axis=1, output_type=tf.int32)  # [N] the first best on ties
    start = tf.gather(start_index[:, :, 0], best // k, batch_dims=1)  # [N] its start rank
    end = tf.gather(end_index[:, 0, :], best % k, batch_dims=1)  # [N] its end rank
    return tf.reduce_max(flat, axis=1), start, end


def _best_window(window_scores, row_splits):
    """window_scores [N], row_splits [B + 1] -> [B] index (into N) of each question's best
    window (the first one on ties)."""
    per_example = tf.RaggedTensor.from_row_splits(window_scores, row_splits)
    padded = per_example.to_tensor(NO_ANSWER_SCORE)  # every example has >= 1 window
    return row_splits[:-1] + tf.argmax(padded, axis=1)


def _padded(values):
    """values [P] + one 0 at the end, so index 0 is always valid, even for an empty batch."""
    return tf.concat([values, tf.zeros([1], values.dtype)], axis=0)
