"""Exact match and F1 for SQuAD, exactly as the official evaluation scripts define them.

v1.1 (`evaluate-v1.1.py`): both texts are normalized (lower-case, punctuation removed, the
articles a/an/the removed, white space collapsed); exact match is string equality, F1 is over
the normalized tokens with multiset (Counter) overlap; each question takes the max over its
gold answers; totals are percentages over all questions (a missing prediction scores 0).

v2.0 (`evaluate-v2.0.py`): an unanswerable question's only gold answer is "" (gold answers
that normalize to "" are dropped first); F1 between an empty and a non-empty answer is 0, between
two empty ones 1. Adds HasAns_/NoAns_ breakdowns and, given no-answer probabilities (or
null-score differences from `squad_postprocess`), the best threshold over them.

Example:
>>> squad_v1_metrics("dev-v1.1.json", {"56be4db0acb8001400a502ec": "Denver Broncos"})
{'exact_match': ..., 'f1': ..., 'total': ...}
"""

import collections
import json
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction, ground_truth):
    """1 when the normalized texts are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction, ground_truth):
    """Token F1 of the normalized texts (v2.0 rule: two empty answers agree, F1 1)."""
    prediction_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(ground_truth).split()
    if not prediction_tokens or not truth_tokens:
        return float(prediction_tokens == truth_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_v1_metrics(dataset, predictions):
    """SQuAD v1.1 exact match and F1 in percent.

    Args:
        dataset: a SQuAD JSON path, the parsed file ({"data": [...]}) or its "data" list.
        predictions: {question id: answer text} (the official predictions file format).
    Returns: {"exact_match", "f1", "total", "missing_predictions"}.
    """
    questions = _questions(dataset)
    predictions = _check_predictions(predictions, questions)
    exact = f1 = 0.0
    for qid, gold in questions.items():
        if qid not in predictions:
            continue  # scored 0, as the official script does
        golds = [answer["text"] for answer in gold["answers"]]
        if not golds:
            raise ValueError(
                f"Question {qid!r} has no gold answers; SQuAD v1.1 needs at least one "
                "(use squad_v2_metrics for unanswerable questions).")
        exact += max(exact_match_score(predictions[qid], g) for g in golds)
        f1 += max(_f1_v1(predictions[qid], g) for g in golds)
    total = len(questions)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total, "total": total,
            "missing_predictions": sum(qid not in predictions for qid in questions)}


def squad_v2_metrics(dataset, predictions, no_answer_probabilities=None,
                     no_answer_threshold=1.0):
    """SQuAD v2.0 metrics in percent: exact, f1, total, HasAns_*/NoAns_* and, when
    `no_answer_probabilities` ({qid: float}, higher = more likely unanswerable) is given,
    best_exact/best_f1 and the thresholds that reach them.

    A question whose probability exceeds `no_answer_threshold` is scored as answered "".
    Missing predictions score 0 (the official script would fail on them).
    """
    questions = _questions(dataset)
    predictions = _check_predictions(predictions, questions)
    has_answer = {qid: bool(q["answers"]) for qid, q in questions.items()}
    exact_raw, f1_raw = {}, {}
    for qid, gold in questions.items():
        golds = [a["text"] for a in gold["answers"] if normalize_answer(a["text"])] or [""]
        prediction = predictions.get(qid)
        if prediction is None:
            exact_raw[qid] = f1_raw[qid] = 0.0
            continue
        exact_raw[qid] = max(exact_match_score(prediction, g) for g in golds)
        f1_raw[qid] = max(f1_score(prediction, g) for g in golds)
    probabilities = no_answer_probabilities or {qid: 0.0 for qid in questions}
    missing = [qid for qid in questions if qid not in probabilities]
    if missing:
        raise ValueError(f"no_answer_probabilities lacks {len(missing)} question ids, e.g. "
                         f"{missing[:3]}; give one number per question.")
    exact = _apply_threshold(exact_raw, probabilities, has_answer, no_answer_threshold)
    f1 = _apply_threshold(f1_raw, probabilities, has_answer, no_answer_threshold)
    result = _totals(exact, f1, list(questions))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in questions if has_answer[qid] == wanted]
        if qids:
            result.update({f"{prefix}_{k}": v for k, v in _totals(exact, f1, qids).items()})
    if no_answer_probabilities is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            score, threshold = _best_threshold(predictions, raw, probabilities, has_answer)
            result[f"best_{name}"] = score
            result[f"best_{name}_thresh"] = threshold
    result["missing_predictions"] = sum(qid not in predictions for qid in questions)
    return result


def read_predictions(path):
    """Reads an official-format predictions JSON file {question id: answer text}."""
    with open(path, encoding="utf-8") as f:
        try:
            predictions = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg}).") from None
    return _check_predictions(predictions, None, source=path)


def _f1_v1(prediction, ground_truth):
    # v1.1's F1 has no empty-answer rule: an empty prediction or gold scores 0.
    if not normalize_answer(prediction).split() or not normalize_answer(ground_truth).split():
        return 0.0
    return f1_score(prediction, ground_truth)


def _apply_threshold(scores, probabilities, has_answer, threshold):
    return {qid: float(not has_answer[qid]) if probabilities[qid] > threshold else s
            for qid, s in scores.items()}


def _totals(exact, f1, qids):
    return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1[q] for q in qids) / len(qids), "total": len(qids)}


def _best_threshold(predictions, scores, probabilities, has_answer):
    """The official find_best_thresh: sweep thresholds in increasing probability order."""
    score = best = sum(1 for answered in has_answer.values() if not answered)
    best_threshold = 0.0
    for qid in sorted(probabilities, key=lambda k: probabilities[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions.get(qid):
            score -= 1
        if score > best:
            best, best_threshold = score, probabilities[qid]
    return 100.0 * best / len(scores), best_threshold


def _questions(dataset):
    """{qid: qa dict} from a path, a parsed file or its "data" list, validating the keys."""
    source = "dataset"
    if isinstance(dataset, str):
        source = dataset
        with open(dataset, encoding="utf-8") as f:
            try:
                dataset = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{source}: not valid JSON (line {e.lineno}: {e.msg}).") from None
    if isinstance(dataset, dict):
        if "data" not in dataset:
            raise ValueError(f"{source}: a SQuAD file needs a top-level 'data' list.")
        dataset = dataset["data"]
    questions = {}
    for a, article in enumerate(dataset):
        for p, paragraph in enumerate(article.get("paragraphs", ())):
            for qa in paragraph.get("qas", ()):
                if "id" not in qa or "answers" not in qa:
                    raise ValueError(f"{source}: data[{a}].paragraphs[{p}] has a question "
                                     "without 'id' or 'answers'.")
                questions[qa["id"]] = qa
    if not questions:
        raise ValueError(f"{source}: no questions found (expected data[].paragraphs[].qas[]).")
    return questions


def _check_predictions(predictions, questions, source="predictions"):
    if not isinstance(predictions, dict):
        raise ValueError(f"{source} must map question id -> answer text, got "
                         f"{type(predictions).__name__}.")
    for qid, text in predictions.items():
        if not isinstance(text, str):
            raise ValueError(f"{source}: the prediction for {qid!r} is {type(text).__name__}, "
                             "not a string.")
    if questions is not None and predictions and not any(q in questions for q in predictions):
        raise ValueError(f"None of the {len(predictions)} predicted ids is a question of the "
                         f"dataset (e.g. {next(iter(predictions))!r}); wrong predictions file?")
    return predictions
