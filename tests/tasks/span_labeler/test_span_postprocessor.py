"""Span labeler post-processing (`best_answers`, in the graph): parity with Model Garden's
`squad_lib.postprocess_output` on real Quoref windows, answers cut from the original context,
max_answer_length, the no-answer threshold and argument errors."""

import numpy as np
import pytest

from keras_bert_suite.tasks.span_labeler import metric as squad_metric
from keras_bert_suite.tasks.span_labeler.postprocessor import NO_ANSWER_SCORE, best_answers
from tests.tasks.span_labeler import squad_fixtures as fx

pytestmark = pytest.mark.needs_tf_graph


@pytest.fixture(scope="module")
def windows():
    """(our examples, our SpanWindows), (Model Garden examples, features): 97 questions (20
    of them unanswerable) in 1,152 windows of 128 tokens."""
    return fx.features_pair(True, 128, 32)


def _squash(text):
    return " ".join(text.split())


def _by_question(examples, result):
    """best_answers' [B] tensors -> {qas_id: {answer (str), start, end, score, diff}}."""
    columns = {k: np.asarray(v) for k, v in result.items()}
    return {e.qas_id: {"answer": columns["answer"][i].decode("utf-8"),
                       "start": int(columns["start"][i]), "end": int(columns["end"][i]),
                       "score": float(columns["score"][i]),
                       "null_score_diff": float(columns["null_score_diff"][i])}
            for i, e in enumerate(examples)}


@pytest.mark.parametrize("version_2, n_best_size", [(False, 20), (True, 20), (False, 3)])
def test_matches_model_garden(windows, version_2, n_best_size):
    from official.nlp.data import squad_lib

    (examples, ours_windows), (mg_examples, mg_features) = windows
    start, end = fx.noisy_logits(ours_windows)
    ours = _by_question(examples, best_answers(
        ours_windows, start, end, max_answer_length=30, n_best_size=n_best_size,
        version_2_with_negative=version_2))
    answers, nbest, null_diff = squad_lib.postprocess_output(
        mg_examples, mg_features, fx.model_garden_results(mg_features, start, end),
        n_best_size=n_best_size, max_answer_length=30, do_lower_case=True,
        version_2_with_negative=version_2)
    assert list(ours) == list(answers)
    # Where no span is valid the reference answers its placeholder "empty"; we answer "" with
    # the score NO_ANSWER_SCORE (with 3 best starts and ends, some questions whose windows
    # point at [CLS] have no valid span).
    no_span = {q for q, a in ours.items() if a["score"] == NO_ANSWER_SCORE}
    assert no_span == {q for q, a in answers.items() if a == "empty"}
    assert bool(no_span) == (n_best_size == 3)
    answers = {q: "" if q in no_span else a for q, a in answers.items()}
    # Model Garden rebuilds text from whitespace words joined by one space; we cut the context,
    # so a span across a line break keeps its "\n". Otherwise the texts are identical.
    assert {q: _squash(a["answer"]) for q, a in ours.items()} == answers
    assert sum(ours[q]["answer"] == answers[q] for q in answers) >= 0.9 * len(answers)
    for example in examples:
        result = ours[example.qas_id]
        assert example.context[result["start"]:result["end"]] == result["answer"]
        # The chosen span's score is the best non-null entry of the reference's n-best list.
        best = next((e for e in nbest[example.qas_id] if e["text"]), None)
        if best is not None and result["answer"]:
            np.testing.assert_allclose(result["score"], best["start_logit"] + best["end_logit"],
                                       rtol=1e-6, atol=1e-6)
    if version_2:
        assert list(null_diff) == list(ours)
        np.testing.assert_allclose([ours[q]["null_score_diff"] for q in null_diff],
                                   list(null_diff.values()), rtol=1e-6, atol=1e-5)
        assert sum(a["answer"] == "" for a in ours.values()) > 0
    else:
        assert {q for q, a in ours.items() if a["answer"] == ""} == no_span


def _oracle_logits(examples, windows):
    """Logits that point exactly at the gold span (at [CLS] for unanswerable questions)."""
    token_ids = np.asarray(windows.inputs["token_ids"])
    start = np.full(token_ids.shape, -10.0, np.float32)
    end = start.copy()
    rows = np.arange(len(token_ids))
    start[rows, np.asarray(windows.labels["start_positions"])] = 10.0
    end[rows, np.asarray(windows.labels["end_positions"])] = 10.0
    answerable = np.array([not examples[i].is_impossible for i in np.asarray(windows.example)])
    start[answerable, 0] = end[answerable, 0] = -20.0  # windows without the answer: no null
    return start, end


def test_oracle_logits_give_the_gold_answers_as_written(windows):
    (examples, ours_windows), _ = windows
    start, end = _oracle_logits(examples, ours_windows)
    result = _by_question(examples, best_answers(ours_windows, start, end,
                                                 version_2_with_negative=True))
    for example in examples:
        answer = result[example.qas_id]
        assert answer["answer"] == (example.answer_text or ""), example.qas_id
        if example.is_impossible:
            assert answer["null_score_diff"] > 0
        else:
            assert (answer["start"], answer["end"]) == (
                example.answer_start, example.answer_start + len(example.answer_text))
            assert answer["score"] == 20.0 and answer["null_score_diff"] == -60.0  # -20-20 - 20
    dataset = fx.quoref_dataset(version_2=True)
    metrics = squad_metric.squad_v2_metrics(
        dataset, {q: a["answer"] for q, a in result.items()})
    assert (metrics["exact"], metrics["f1"], metrics["total"]) == (100.0, 100.0, 97)
    assert metrics["NoAns_total"] == 20


def _pieces_in(windows, example_index, begin_char, end_char, context):
    """How many context pieces lie inside the answer's characters [begin, end)."""
    to_byte = len(context[:begin_char].encode("utf-8")), len(context[:end_char].encode("utf-8"))
    starts = np.asarray(windows.piece_byte_start[example_index])
    ends = np.asarray(windows.piece_byte_end[example_index])
    return int(((starts >= to_byte[0]) & (ends <= to_byte[1])).sum())


@pytest.mark.parametrize("max_answer_length", [1, 3])
def test_max_answer_length_counts_pieces(windows, max_answer_length):
    (examples, ours_windows), _ = windows
    start, end = fx.noisy_logits(ours_windows, seed=1)
    result = _by_question(examples, best_answers(ours_windows, start, end,
                                                 max_answer_length=max_answer_length))
    lengths = []
    for i, example in enumerate(examples):
        answer = result[example.qas_id]
        assert answer["answer"] and answer["score"] > NO_ANSWER_SCORE
        lengths.append(_pieces_in(ours_windows, i, answer["start"], answer["end"],
                                  example.context))
        if max_answer_length == 1:  # one WordPiece: part of one word
            assert not any(c.isspace() for c in answer["answer"])
    assert 1 <= min(lengths) and max(lengths) <= max_answer_length
    if max_answer_length == 3:
        assert max(lengths) == 3


def test_no_answer_threshold(windows):
    (examples, ours_windows), _ = windows
    start, end = fx.noisy_logits(ours_windows, seed=2)
    result = _by_question(examples, best_answers(ours_windows, start, end,
                                                 version_2_with_negative=True))
    diffs = {q: a["null_score_diff"] for q, a in result.items()}
    middle = float(np.median(list(diffs.values())))
    at_middle = _by_question(examples, best_answers(ours_windows, start, end,
                                                    version_2_with_negative=True,
                                                    null_score_diff_threshold=middle))
    assert {q for q, a in at_middle.items() if a["answer"] == ""} == {
        q for q, d in diffs.items() if d > middle}
    never = _by_question(examples, best_answers(ours_windows, start, end,
                                                version_2_with_negative=True,
                                                null_score_diff_threshold=1e9))
    assert "" not in {a["answer"] for a in never.values()}
    # The no-answer decision is the only difference: answered questions keep their span,
    # and without SQuAD 2.0 the threshold is ignored.
    for q, a in at_middle.items():
        assert a["answer"] in ("", never[q]["answer"])
    v1 = _by_question(examples, best_answers(ours_windows, start, end,
                                             null_score_diff_threshold=-1e9))
    assert {q: a["answer"] for q, a in v1.items()} == {q: a["answer"]
                                                      for q, a in never.items()}


def test_prediction_files(windows, tmp_path):
    (examples, ours_windows), _ = windows
    start, end = fx.noisy_logits(ours_windows)
    answers = {q: a["answer"]
               for q, a in _by_question(examples, best_answers(ours_windows, start,
                                                               end)).items()}
    path = squad_metric.write_predictions_json(answers, tmp_path / "predictions.json")
    assert squad_metric.read_predictions(path) == answers


@pytest.mark.parametrize("argument, value, message", [
    ("n_best_size", 0, "n_best_size must be a positive int, got 0"),
    ("max_answer_length", 0, "max_answer_length must be a positive int, got 0"),
    ("max_answer_length", True, "max_answer_length must be a positive int, got True"),
    ("n_best_size", 2.0, "n_best_size must be a positive int, got 2.0"),
])
def test_bad_arguments(windows, argument, value, message):
    (_, ours_windows), _ = windows
    start, end = fx.noisy_logits(ours_windows)
    with pytest.raises(ValueError, match=message):
        best_answers(ours_windows, start, end, **{argument: value})
