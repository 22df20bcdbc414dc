"""SQuAD exact match / F1: the official definitions, and parity with Model Garden's copies of
the official v1.1 and v2.0 scripts on real predictions over real Quoref questions."""

import types

import numpy as np
import pytest

from keras_bert_suite.tasks.span_labeler import metric as sm
from keras_bert_suite.tasks.span_labeler.postprocessor import best_answers
from tests.tasks.span_labeler import squad_fixtures as fx


@pytest.fixture(scope="module")
def predictions():
    """Predictions of noisy span logits on 97 Quoref questions (20 unanswerable copies):
    .answers {qid: text}, .null_score_diff {qid: float}."""
    (examples, windows), _ = fx.features_pair(True, 128, 32)
    start, end = fx.noisy_logits(windows, noise=1.0, boost=3.0)
    result = best_answers(windows, start, end, version_2_with_negative=True)
    qids = [e.qas_id for e in examples]
    return types.SimpleNamespace(
        answers={q: a.decode("utf-8") for q, a in zip(qids, np.asarray(result["answer"]))},
        null_score_diff={q: float(d) for q, d in zip(qids, np.asarray(
            result["null_score_diff"]))})


def _tiny(with_unanswerable=False):
    """Three hand-made questions whose scores are worked out by hand in the tests below."""
    qas = [{"id": "q1", "question": "Who won?", "answers": [
                {"text": "Denver Broncos", "answer_start": 0}]},
           {"id": "q2", "question": "Who lost?", "answers": [
                {"text": "Carolina Panthers", "answer_start": 19},
                {"text": "Panthers", "answer_start": 28}]}]
    if with_unanswerable:
        qas.append({"id": "q3", "question": "Who sang?", "answers": [], "is_impossible": True})
    context = "Denver Broncos beat Carolina Panthers."
    return {"version": "v2.0" if with_unanswerable else "1.1",
            "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_hand_computed_v1_and_v2_scores():
    predictions = {"q1": "the Denver Broncos!", "q2": "Carolina"}
    # q1: exact after normalization. q2: "carolina" vs "carolina panthers" -> precision 1,
    # recall 1/2, F1 2/3 (vs "panthers": 0); the max over gold answers is 2/3.
    v1 = sm.squad_v1_metrics(_tiny(), predictions)
    assert v1 == pytest.approx({"exact_match": 50.0, "f1": 100 * (1 + 2 / 3) / 2, "total": 2,
                                "missing_predictions": 0})
    # q3 is unanswerable and answered "": exact 1, F1 1.
    v2 = sm.squad_v2_metrics(_tiny(True), {**predictions, "q3": ""},
                             no_answer_probabilities={"q1": 0.1, "q2": 0.9, "q3": 0.5})
    assert v2["exact"] == pytest.approx(100 * 2 / 3)
    assert v2["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 3)
    assert (v2["total"], v2["HasAns_total"], v2["NoAns_total"]) == (3, 2, 1)
    assert v2["HasAns_exact"] == pytest.approx(50.0) and v2["NoAns_f1"] == pytest.approx(100.0)
    # Threshold search over no-answer probabilities ascending (q1 0.1, q3 0.5, q2 0.9),
    # starting from "answer nothing" (1 of 3 right): answering q1 adds 1 (best: 2 at 0.1);
    # q3 is already "" (+0); q2 adds 0 for exact, 2/3 for F1 (best F1 2 2/3 at 0.9).
    assert v2["best_exact"] == pytest.approx(100 * 2 / 3) and v2["best_exact_thresh"] == 0.1
    assert v2["best_f1"] == pytest.approx(100 * (2 + 2 / 3) / 3) and v2["best_f1_thresh"] == 0.9
    assert v2["missing_predictions"] == 0
    plain = sm.squad_v2_metrics(_tiny(True), {**predictions, "q3": "x"})
    assert "best_f1" not in plain and plain["NoAns_exact"] == 0.0
    assert sm.score_answers(_tiny(), predictions) == pytest.approx(v1)


def test_normalization_and_scores():
    assert sm.normalize_answer("  The Denver   Broncos!! ") == "denver broncos"
    assert sm.normalize_answer("Theater, an Anthem") == "theater anthem"  # words only
    assert sm.exact_match_score("the Broncos.", "Broncos") == 1
    # tokens [cat, sat] vs [cat, sat, on, mat]: precision 1, recall 1/2
    assert sm.f1_score("The cat sat", "a cat sat on mat") == pytest.approx(2 / 3)
    assert sm.f1_score("cat cat", "cat") == pytest.approx(2 / 3)  # Counter overlap, not sets
    assert sm.f1_score("", "") == 1.0 and sm.f1_score("", "a cat") == 0.0


def test_v1_matches_model_garden(predictions):
    from official.nlp.tools import squad_evaluate_v1_1

    dataset = fx.quoref_dataset()  # the 77 answerable questions
    answers = {q: a for q, a in predictions.answers.items() if not q.endswith("-unanswerable")}
    ours = sm.squad_v1_metrics(dataset, answers)
    reference = squad_evaluate_v1_1.evaluate(dataset["data"], answers)
    assert ours["exact_match"] == pytest.approx(100 * reference["exact_match"], abs=1e-9)
    assert ours["f1"] == pytest.approx(100 * reference["final_f1"], abs=1e-9)
    assert ours["total"] == 77 and ours["missing_predictions"] == 0
    assert 20 < ours["exact_match"] < ours["f1"] < 100  # a real mix of right and wrong


def test_v2_matches_model_garden(predictions):
    from official.nlp.tools import squad_evaluate_v2_0

    dataset = fx.quoref_dataset(version_2=True)
    diffs = predictions.null_score_diff
    ours = sm.squad_v2_metrics(dataset, predictions.answers, no_answer_probabilities=diffs)
    reference = squad_evaluate_v2_0.evaluate(dataset["data"], predictions.answers, diffs)
    for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                "NoAns_exact", "NoAns_f1", "NoAns_total"):
        assert ours[key] == pytest.approx(reference[key], abs=1e-9), key
    for ours_key, key in (("best_exact", "final_exact"), ("best_f1", "final_f1"),
                          ("best_exact_thresh", "final_exact_thresh"),
                          ("best_f1_thresh", "final_f1_thresh")):
        assert ours[ours_key] == pytest.approx(reference[key], abs=1e-9), key
    assert (ours["total"], ours["NoAns_total"]) == (97, 20)
    assert 0 < ours["NoAns_exact"] < 100 and ours["best_f1"] >= ours["f1"]
    plain = sm.squad_v2_metrics(dataset, predictions.answers)
    reference = squad_evaluate_v2_0.evaluate(dataset["data"], predictions.answers)
    assert plain["f1"] == pytest.approx(reference["f1"], abs=1e-9)


def test_missing_and_wrong_predictions(tmp_path):
    dataset = fx.quoref_dataset()
    qids = [qa["id"] for a in dataset["data"] for qa in a["paragraphs"][0]["qas"]]
    gold = {qa["id"]: qa["answers"][0]["text"]
            for a in dataset["data"] for qa in a["paragraphs"][0]["qas"]}
    half = dict(list(gold.items())[: len(qids) // 2])
    result = sm.squad_v1_metrics(dataset, half)  # missing answers score 0, as officially
    assert result["exact_match"] == pytest.approx(100 * len(half) / len(qids))
    assert result["missing_predictions"] == len(qids) - len(half)
    with pytest.raises(ValueError, match="None of the 1 predicted ids"):
        sm.squad_v1_metrics(dataset, {"squad-1": "x"})
    with pytest.raises(ValueError, match="the prediction for 'quoref-0' is int"):
        sm.squad_v1_metrics(dataset, {"quoref-0": 3})
    bad = tmp_path / "predictions.json"
    bad.write_text('{"quoref-0": "Catherine",')
    with pytest.raises(ValueError, match=r"predictions\.json: not valid JSON"):
        sm.read_predictions(str(bad))
    with pytest.raises(ValueError, match="lacks 1 question ids"):
        sm.squad_v2_metrics(dataset, gold, no_answer_probabilities=dict.fromkeys(qids[1:], 0.0))
    # SQuAD 2.0 needs every prediction (the official script would shrink the total).
    with pytest.raises(ValueError, match=rf"{len(qids) - len(half)} questions have no "
                                         rf"prediction \(e\.g\. \['{qids[len(half)]}'"):
        sm.squad_v2_metrics(dataset, half)
    with pytest.raises(ValueError, match="must map question id -> answer text, got list"):
        sm.squad_v2_metrics(dataset, ["Catherine"])
    with pytest.raises(ValueError, match="no gold answers; SQuAD v1.1 needs at least one"):
        sm.squad_v1_metrics(_tiny(True), {"q1": "x"})
    listed = tmp_path / "list.json"
    listed.write_text('["Catherine"]')
    with pytest.raises(ValueError, match="must map question id -> answer text, got list"):
        sm.read_predictions(str(listed))
