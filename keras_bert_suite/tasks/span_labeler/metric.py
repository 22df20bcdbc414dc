"""SQuAD exact match and F1: the official evaluation scripts, as Model Garden ships them.

The scoring itself is `official.nlp.tools.squad_evaluate_v1_1` / `squad_evaluate_v2_0`
(tf-models-official, a dependency), Model Garden's copies of the official `evaluate-v1.1.py`
and `evaluate-v2.0.py`: answers are normalized (lower-case, punctuation and the articles
a/an/the removed, white space collapsed), exact match is string equality, F1 the token overlap,
each question takes the max over its gold answers. This module adds what a library user
needs around them: a path, a parsed file or its "data" list as the dataset; predictions
checked with clear errors; percentages (v1.1's script returns fractions) under one set of
key names; and SQuAD 2.0's no-answer threshold search from null-score differences.

Example:
>>> from keras_bert_suite.data import corpora
>>> from keras_bert_suite.tasks.span_labeler.quoref import quoref_to_squad
>>> dev, _ = quoref_to_squad(corpora.fetch_quoref(), limit=2)  # a SQuAD v1.1 dict
>>> [qa] = dev["data"][0]["paragraphs"][0]["qas"][:1]
>>> gold = qa["answers"][0]["text"]
>>> squad_v1_metrics(dev, {qa["id"]: gold, "quoref-1": "a wrong answer"})
{'exact_match': 50.0, 'f1': 50.0, 'total': 2, 'missing_predictions': 0}
"""

import json

import tensorflow as tf


def _official(version):
    # Imported on use: Model Garden's package is large and only scoring needs it.
    from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

    return squad_evaluate_v1_1 if version == 1 else squad_evaluate_v2_0


def normalize_answer(text):
    """The official normalization (lower-case, no punctuation, no a/an/the, single spaces)."""
    return _official(2)._normalize_answer(text)


def exact_match_score(prediction, ground_truth):
    return int(_official(2)._compute_exact(ground_truth, prediction))


def f1_score(prediction, ground_truth):
    """Token F1 with SQuAD 2.0's rule for empty answers (two empty answers score 1)."""
    return float(_official(2)._compute_f1(ground_truth, prediction))


def squad_v1_metrics(dataset, predictions):
    """SQuAD v1.1 exact match and F1 in percent (a missing prediction scores 0, as in the
    official script).

    Args:
        dataset: a SQuAD JSON path, the parsed file ({"data": [...]}) or its "data" list.
        predictions: {question id: answer text} (the official predictions format).
    Returns: {"exact_match", "f1", "total", "missing_predictions"}.
    """
    articles, questions = _questions(dataset)
    predictions = _check_predictions(predictions, questions)
    for qid, question in questions.items():
        if not question["answers"]:
            raise ValueError(
                f"Question {qid!r} has no gold answers; SQuAD v1.1 needs at least one "
                "(use squad_v2_metrics for unanswerable questions).")
    missing = sum(qid not in predictions for qid in questions)
    if missing:
        tf.get_logger().warning("%d of %d questions have no prediction; they score 0.",
                                missing, len(questions))
    scores = _quietly(_official(1).evaluate, articles, predictions)
    return {"exact_match": 100.0 * scores["exact_match"], "f1": 100.0 * scores["final_f1"],
            "total": len(questions), "missing_predictions": missing}


def squad_v2_metrics(dataset, predictions, no_answer_probabilities=None):
    """SQuAD v2.0 metrics in percent: exact, f1, total, HasAns_*/NoAns_* and, when
    `no_answer_probabilities` ({qid: float}, higher = more likely unanswerable; e.g. the
    span labeler's `null_score_diff`) is given, best_exact/best_f1 and the thresholds that
    reach them. A question whose probability exceeds 1.0 is scored as answered "" (the
    script's threshold). Every question needs a prediction (the official script would drop the
    unanswered ones from the total)."""
    articles, questions = _questions(dataset)
    predictions = _check_predictions(predictions, questions)
    missing = [qid for qid in questions if qid not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} questions have no prediction (e.g. {missing[:3]}); "
                         "SQuAD 2.0 scoring needs one per question (\"\" = no answer).")
    if no_answer_probabilities is not None:
        lacking = [qid for qid in questions if qid not in no_answer_probabilities]
        if lacking:
            raise ValueError(f"no_answer_probabilities lacks {len(lacking)} question ids, "
                             f"e.g. {lacking[:3]}; give one number per question.")
    official = _official(2)
    probabilities = no_answer_probabilities or {qid: 0.0 for qid in predictions}
    result = _quietly(official.evaluate, articles, predictions, probabilities)
    if no_answer_probabilities is None:
        result = {k: v for k, v in result.items() if not k.startswith("final_")}
    else:
        for name in ("exact", "f1"):
            result[f"best_{name}"] = result.pop(f"final_{name}")
            result[f"best_{name}_thresh"] = result.pop(f"final_{name}_thresh")
    result["missing_predictions"] = 0
    return result


def score_answers(dataset, answers, version_2_with_negative=False, null_score_diff=None):
    """The task's metrics dict: v1.1's or v2.0's (with the threshold search when
    `null_score_diff` is given), floats only."""
    if version_2_with_negative:
        metrics = squad_v2_metrics(dataset, answers, no_answer_probabilities=null_score_diff)
    else:
        metrics = squad_v1_metrics(dataset, answers)
    return {k: float(v) if isinstance(v, float) else v for k, v in metrics.items()}


def read_predictions(path):
    """Reads an official-format predictions JSON file {question id: answer text}."""
    with open(path, encoding="utf-8") as f:
        try:
            predictions = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg}).") from None
    return _check_predictions(predictions, None, source=path)


def write_predictions_json(answers, path):
    """Writes {question id: answer text}, the official SQuAD predictions file."""
    with tf.io.gfile.GFile(str(path), "w") as f:
        json.dump(answers, f, ensure_ascii=False, indent=2)
    return str(path)


def _quietly(function, *args):
    """The scripts log every unanswered question at ERROR level; the caller reports it."""
    from absl import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity(logging.FATAL)
    try:
        return function(*args)
    finally:
        logging.set_verbosity(verbosity)


def _questions(dataset):
    """(the "data" list, {qid: qa dict}) from a path, a parsed file or its "data" list,
    validating the keys."""
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
    return dataset, questions


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
