"""Span logits of every window -> one answer per question (google-research/bert's rule).

For each example, over all its windows: take the `n_best_size` best start and end positions
of each window, keep pairs with both ends inside the context, start <= end, at most
`max_answer_length` pieces, and a start in the window that gives that piece the most
context; score = start_logit + end_logit; the best distinct texts form the n-best list.
The answer text is cut from the original context by the pieces' character offsets, so it is
the context as written (case, accents, spacing kept) with no detokenization heuristics.

SQuAD 2.0 (`version_2_with_negative=True`): the null score is start_logits[0] + end_logits[0]
([CLS]) of the window where it is lowest; the question is answered "" when
null score - best span score > `null_score_diff_threshold`.

Checked against Model Garden's `squad_lib.postprocess_output` on the same windows and logits:
same n-best scores, probabilities, null-score differences and choices. Two intended
differences: an answer that spans a line break or double space keeps it (the reference joins
whitespace-separated words with one space, so the SQuAD metric sees the same tokens), and an
example with no valid span gets "" rather than the reference's placeholder "empty".

Example:
>>> outputs = span_labeler.predict(inference_dataset(features))
>>> result = postprocess_predictions(examples, features, outputs["start_logits"],
...                                  outputs["end_logits"])
>>> write_predictions_json(result.answers, "predictions.json")   # {qid: answer}
"""

import collections
import dataclasses
import json

import numpy as np
import tensorflow as tf


@dataclasses.dataclass
class SquadPredictions:
    """answers: {qid: text} (the official predictions format).
    nbest: {qid: [{"text", "probability", "start_logit", "end_logit", "start_char",
        "end_char"}, ...]} best first; start_char/end_char index the context (-1 for "").
    null_score_diff: {qid: null score - best span score} (SQuAD 2.0 only; tune the threshold
        on it, or pass it to squad_v2_metrics as no-answer probabilities)."""

    answers: dict
    nbest: dict
    null_score_diff: dict


def postprocess_predictions(examples, features, start_logits, end_logits, n_best_size=20,
                            max_answer_length=30, version_2_with_negative=False,
                            null_score_diff_threshold=0.0):
    """Picks each example's answer from the [N, T] logits of its windows (see module doc)."""
    # float64 sums, as the reference adds Python floats.
    start_logits = np.asarray(start_logits, np.float64)
    end_logits = np.asarray(end_logits, np.float64)
    expected = features.token_ids.shape
    if start_logits.shape != expected or end_logits.shape != expected:
        raise ValueError(
            f"start/end logits must be [num_windows, max_seq_length] = {expected} (one row per "
            f"feature, in feature order), got {start_logits.shape} and {end_logits.shape}.")
    for name, value in (("n_best_size", n_best_size), ("max_answer_length", max_answer_length)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
    windows_of = collections.defaultdict(list)
    for row, example_index in enumerate(features.example_index):
        windows_of[int(example_index)].append(row)
    answers, nbest, null_diff = {}, {}, {}
    for index, example in enumerate(examples):
        rows = windows_of.get(index)
        if not rows:
            raise ValueError(f"Example {index} ({example.qas_id!r}) has no windows in the "
                             "features; pass the examples the features were made from.")
        candidates = []
        for row in rows:
            candidates.extend(_window_candidates(
                features, row, start_logits[row], end_logits[row], n_best_size,
                max_answer_length))
        null = None
        if version_2_with_negative:
            null_row = min(rows, key=lambda r: start_logits[r, 0] + end_logits[r, 0])
            null = (float(start_logits[null_row, 0] + end_logits[null_row, 0]), -1, -1,
                    float(start_logits[null_row, 0]), float(end_logits[null_row, 0]))
            candidates.append(null)  # last, so a span with the same score ranks first
        candidates.sort(key=lambda c: c[0], reverse=True)  # stable, as the reference's sort
        entries = _distinct_texts(example.context, candidates, n_best_size)
        if null is not None and not any(e["text"] == "" for e in entries):
            entries.append(_entry("", *null[3:], -1, -1))
        if not entries:  # no valid span at all (e.g. every context piece is in the question)
            entries = [_entry("", 0.0, 0.0, -1, -1)]
        _add_probabilities(entries)
        best_span = next((e for e in entries if e["text"]), None)
        if version_2_with_negative:
            diff = null[0] - _score(best_span) if best_span else null[0]
            null_diff[example.qas_id] = diff
            no_answer = best_span is None or diff > null_score_diff_threshold
            answers[example.qas_id] = "" if no_answer else best_span["text"]
        else:
            answers[example.qas_id] = entries[0]["text"]
        nbest[example.qas_id] = entries
    return SquadPredictions(answers, nbest, null_diff)


def _window_candidates(features, row, start_logits, end_logits, n_best_size, max_answer_length):
    """(score, start_char, end_char, start_logit, end_logit) of the valid spans of one window."""
    offsets = features.token_offsets[row]  # [T, 2]
    is_max_context = features.token_is_max_context[row]  # [T]
    # Stable sorts: equal logits keep position order, as the reference's sorted() does.
    best_starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    best_ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    candidates = []
    for start in best_starts:
        if offsets[start, 0] < 0 or not is_max_context[start]:
            continue
        for end in best_ends:
            if offsets[end, 0] < 0 or end < start or end - start + 1 > max_answer_length:
                continue
            candidates.append((float(start_logits[start] + end_logits[end]),
                               int(offsets[start, 0]), int(offsets[end, 1]),
                               float(start_logits[start]), float(end_logits[end])))
    return candidates


def _distinct_texts(context, candidates, n_best_size):
    seen, entries = set(), []
    for _, start_char, end_char, start_logit, end_logit in candidates:
        if len(entries) >= n_best_size:
            break
        text = context[start_char:end_char] if start_char >= 0 else ""  # "" = no answer
        if text in seen:
            continue
        seen.add(text)
        entries.append(_entry(text, start_logit, end_logit, start_char, end_char))
    return entries


def _entry(text, start_logit, end_logit, start_char, end_char):
    return {"text": text, "probability": 0.0, "start_logit": start_logit,
            "end_logit": end_logit, "start_char": start_char, "end_char": end_char}


def _score(entry):
    return entry["start_logit"] + entry["end_logit"]


def _add_probabilities(entries):
    """Softmax of the n-best scores (as the reference's nbest file reports them)."""
    scores = np.array([_score(e) for e in entries], np.float64)
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    for entry, p in zip(entries, probabilities):
        entry["probability"] = float(p)


def write_predictions_json(answers, path):
    """Writes {question id: answer text}, the official SQuAD predictions file."""
    with tf.io.gfile.GFile(str(path), "w") as f:
        json.dump(answers, f, ensure_ascii=False, indent=2)
    return str(path)


def write_nbest_json(nbest, path):
    """Writes the n-best lists {question id: [entries best first]}."""
    with tf.io.gfile.GFile(str(path), "w") as f:
        json.dump(nbest, f, ensure_ascii=False, indent=2)
    return str(path)
