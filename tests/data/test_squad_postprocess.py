"""SQuAD post-processing: parity with Model Garden's postprocess_output on real Quoref
windows, answers cut from the original context, n-best, no-answer threshold, files."""

import json

import numpy as np
import pytest

from keras_bert_suite.tasks.span_labeler import squad_postprocess as pp
from keras_bert_suite.tasks.span_labeler import metric as squad_metric
from tests.data import squad_fixtures as fx

pytestmark = pytest.mark.backend_independent


@pytest.fixture(scope="module")
def windows():
    """(our examples, our features), (Model Garden examples, features): 97 questions (20 of
    them unanswerable) in 1,152 windows of 128 tokens."""
    return fx.features_pair(True, 128, 32)


def _squash(text):
    return " ".join(text.split())


@pytest.mark.parametrize("version_2", [False, True])
def test_matches_model_garden(windows, version_2):
    from official.nlp.data import squad_lib

    (examples, features), (mg_examples, mg_features) = windows
    start, end = fx.noisy_logits(features)
    ours = pp.postprocess_predictions(examples, features, start, end, n_best_size=20,
                                      max_answer_length=30, version_2_with_negative=version_2)
    answers, nbest, null_diff = squad_lib.postprocess_output(
        mg_examples, mg_features, fx.model_garden_results(mg_features, start, end),
        n_best_size=20, max_answer_length=30, do_lower_case=True,
        version_2_with_negative=version_2)
    assert list(ours.answers) == list(answers)
    # Model Garden rebuilds text from whitespace words joined by one space; we cut the context,
    # so a span across a line break keeps its "\n". Otherwise the texts are identical.
    assert {q: _squash(a) for q, a in ours.answers.items()} == answers
    assert sum(ours.answers[q] == answers[q] for q in answers) >= 0.9 * len(answers)
    for qid, reference in nbest.items():
        entries = ours.nbest[qid]
        assert [_squash(e["text"]) for e in entries] == [e["text"] for e in reference]
        np.testing.assert_allclose([e["start_logit"] for e in entries],
                                   [e["start_logit"] for e in reference], rtol=0, atol=0)
        np.testing.assert_allclose([e["probability"] for e in entries],
                                   [e["probability"] for e in reference], rtol=1e-12)
    if version_2:
        assert ours.null_score_diff == pytest.approx(dict(null_diff), abs=1e-9)
        assert sum(a == "" for a in ours.answers.values()) > 0
    else:
        assert ours.null_score_diff == {} and "" not in ours.answers.values()


def _oracle_logits(examples, features):
    """Logits that point exactly at the gold span (at [CLS] for unanswerable questions)."""
    start = np.full(features.token_ids.shape, -10.0, np.float32)
    end = start.copy()
    rows = np.arange(len(features))
    start[rows, features.start_positions] = 10.0
    end[rows, features.end_positions] = 10.0
    answerable = np.array([not examples[i].is_impossible for i in features.example_index])
    start[answerable, 0] = end[answerable, 0] = -20.0  # windows without the answer: no null
    return start, end


def test_oracle_logits_give_the_gold_answers_as_written(windows):
    (examples, features), _ = windows
    start, end = _oracle_logits(examples, features)
    result = pp.postprocess_predictions(examples, features, start, end,
                                        version_2_with_negative=True)
    for example in examples:
        assert result.answers[example.qas_id] == (example.answer_text or ""), example.qas_id
        best = result.nbest[example.qas_id][0]
        if not example.is_impossible:
            assert (best["start_char"], best["end_char"]) == (
                example.answer_start, example.answer_start + len(example.answer_text))
    dataset = fx.quoref_dataset(version_2=True)
    metrics = squad_metric.squad_v2_metrics(dataset, result.answers)
    assert (metrics["exact"], metrics["f1"], metrics["total"]) == (100.0, 100.0, 97)
    assert metrics["NoAns_total"] == 20


def test_n_best_and_max_answer_length(windows):
    (examples, features), _ = windows
    start, end = fx.noisy_logits(features, seed=1)
    result = pp.postprocess_predictions(examples, features, start, end, n_best_size=3)
    for example in examples:
        entries = result.nbest[example.qas_id]
        assert 1 <= len(entries) <= 3
        assert len({e["text"] for e in entries}) == len(entries)
        scores = [e["start_logit"] + e["end_logit"] for e in entries]
        assert scores == sorted(scores, reverse=True)
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
        for entry in entries:
            assert example.context[entry["start_char"]:entry["end_char"]] == entry["text"]
    one_piece = pp.postprocess_predictions(examples, features, start, end, max_answer_length=1)
    for qid, entries in one_piece.nbest.items():  # one WordPiece: part of one word
        assert all(e["text"] and not any(c.isspace() for c in e["text"]) for e in entries)


def test_no_answer_threshold(windows):
    (examples, features), _ = windows
    start, end = fx.noisy_logits(features, seed=2)
    diffs = pp.postprocess_predictions(examples, features, start, end,
                                       version_2_with_negative=True).null_score_diff
    middle = float(np.median(list(diffs.values())))
    answers = pp.postprocess_predictions(examples, features, start, end,
                                         version_2_with_negative=True,
                                         null_score_diff_threshold=middle).answers
    assert {q for q, a in answers.items() if a == ""} == {q for q, d in diffs.items()
                                                         if d > middle}
    never = pp.postprocess_predictions(examples, features, start, end,
                                       version_2_with_negative=True,
                                       null_score_diff_threshold=1e9).answers
    assert "" not in never.values()


def test_prediction_files(windows, tmp_path):
    (examples, features), _ = windows
    start, end = fx.noisy_logits(features)
    result = pp.postprocess_predictions(examples, features, start, end)
    path = pp.write_predictions_json(result.answers, tmp_path / "predictions.json")
    assert squad_metric.read_predictions(path) == result.answers
    nbest_path = pp.write_nbest_json(result.nbest, tmp_path / "nbest.json")
    with open(nbest_path, encoding="utf-8") as f:
        assert json.load(f) == result.nbest


def test_bad_logits_and_examples(windows):
    (examples, features), _ = windows
    start, end = fx.noisy_logits(features)
    with pytest.raises(ValueError, match=r"\[num_windows, max_seq_length\] = \(1152, 128\)"):
        pp.postprocess_predictions(examples, features, start[:10], end[:10])
    with pytest.raises(ValueError, match="n_best_size must be a positive int"):
        pp.postprocess_predictions(examples, features, start, end, n_best_size=0)
    with pytest.raises(ValueError, match="has no windows in the features"):
        pp.postprocess_predictions(examples + examples[:1], features, start, end)
