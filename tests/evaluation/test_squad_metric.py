"""SQuAD exact match / F1: the official definitions, and parity with Model Garden's copies of
the official v1.1 and v2.0 scripts on real predictions over real Quoref questions."""

import pytest

from keras_bert_suite.tasks.span_labeler import squad_postprocess as pp
from keras_bert_suite.tasks.span_labeler import metric as sm
from tests.data import squad_fixtures as fx

pytestmark = pytest.mark.backend_independent


@pytest.fixture(scope="module")
def predictions():
    """Predictions of noisy span logits on 97 Quoref questions (20 unanswerable copies)."""
    (examples, features), _ = fx.features_pair(True, 128, 32)
    start, end = fx.noisy_logits(features, noise=1.0, boost=3.0)
    return pp.postprocess_predictions(examples, features, start, end,
                                      version_2_with_negative=True)


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
