"""Entity-level NER metrics: a hand-computed case and agreement with seqeval on WNUT-16 tags."""

import numpy as np
import pytest
from seqeval import metrics as seqeval_metrics
from seqeval import scheme as seqeval_scheme

from keras_bert_suite.tasks.token_classifier import conll
from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.token_classifier import metric as ner_metrics


@pytest.fixture(scope="module")
def wnut_gold():
    return [list(s.tags) for s in conll.read_conll(corpora.fetch_wnut16())]


@pytest.fixture(scope="module")
def wnut_predicted(wnut_gold):
    """Gold tags with realistic mistakes: wrong types, cut spans, spurious entities."""
    rng = np.random.default_rng(7)
    types = sorted({tag[2:] for sentence in wnut_gold for tag in sentence if tag != "O"})
    predicted = []
    for sentence in wnut_gold:
        out = []
        for tag in sentence:
            draw = rng.random()
            if tag.startswith("B-") and draw < 0.2:
                tag = "B-" + types[rng.integers(len(types))]
            elif tag.startswith("I-") and draw < 0.25:
                tag = "O"
            elif tag == "O" and draw < 0.01:
                tag = "B-person" if draw < 0.007 else "I-other"  # I- after O: IOB1-style start
            out.append(tag)
        predicted.append(out)
    return predicted


def test_hand_computed_scores():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    # Gold entities: PER(0-1), LOC(3), ORG(0). Predicted: PER(0-1), ORG(3), ORG(0).
    # Correct: PER and the second sentence's ORG -> P = R = 2/3.
    scores = ner_metrics.entity_scores(gold, predicted)
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 / 3)
    assert scores["support"] == 3
    assert scores["per_type"] == {
        "LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
        "ORG": {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3), "support": 1},
        "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1},
    }


def test_a_partial_span_is_a_miss():
    scores = ner_metrics.entity_scores([["B-person", "I-person", "O"]], [["B-person", "O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)


def test_lenient_and_strict_chunking():
    gold = [["O", "B-PER", "I-PER"]]
    iob1 = [["O", "I-PER", "I-PER"]]  # conlleval reads I- after O as the start of an entity
    assert ner_metrics.entity_scores(gold, iob1)["f1"] == 1.0
    assert ner_metrics.entity_scores(gold, iob1, scheme="IOB2")["f1"] == 0.0


def test_agrees_with_seqeval_on_wnut(wnut_gold, wnut_predicted):
    scores = ner_metrics.entity_scores(wnut_gold, wnut_predicted)
    assert scores["precision"] == seqeval_metrics.precision_score(wnut_gold, wnut_predicted)
    assert scores["recall"] == seqeval_metrics.recall_score(wnut_gold, wnut_predicted)
    assert scores["f1"] == seqeval_metrics.f1_score(wnut_gold, wnut_predicted)
    assert 0.5 < scores["f1"] < 0.7  # the perturbation is neither trivial nor total
    assert scores["support"] == 1496  # the B- tags of WNUT-16
    precision, recall, f1, support = seqeval_metrics.sequence_labeling.precision_recall_fscore_support(
        wnut_gold, wnut_predicted, average=None)
    names = sorted(scores["per_type"])
    assert len(names) == 10
    for i, name in enumerate(names):
        assert scores["per_type"][name] == {"precision": precision[i], "recall": recall[i],
                                            "f1": f1[i], "support": support[i]}
    assert sum(v["support"] for v in scores["per_type"].values()) == 1496


def test_strict_mode_agrees_with_seqeval(wnut_gold, wnut_predicted):
    scores = ner_metrics.entity_scores(wnut_gold, wnut_predicted, scheme="IOB2")
    expected = seqeval_metrics.f1_score(wnut_gold, wnut_predicted, mode="strict",
                                        scheme=seqeval_scheme.IOB2)
    assert scores["f1"] == expected
    assert scores["f1"] != ner_metrics.entity_scores(wnut_gold, wnut_predicted)["f1"]


def test_classification_report(wnut_gold, wnut_predicted):
    report = ner_metrics.classification_report(wnut_gold, wnut_predicted)
    assert report == seqeval_metrics.classification_report(wnut_gold, wnut_predicted, digits=4)
    lines = report.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1-score", "support"]
    person = next(line.split() for line in lines if line.split()[:1] == ["person"])
    per_type = ner_metrics.entity_scores(wnut_gold, wnut_predicted)["per_type"]["person"]
    assert person[1:] == [f"{per_type['precision']:.4f}", f"{per_type['recall']:.4f}",
                          f"{per_type['f1']:.4f}", "449"]


@pytest.mark.parametrize("gold, predicted, message", [
    ([["O", "B-PER"]], [["O"]], r"sentence 0: 2 gold tags but 1 predicted"),
    ([["O"], ["O"]], [["O"]], r"y_true has 2 sentences but y_pred has 1"),
    (["O", "B-PER"], ["O", "B-PER"], r"y_true must be a list of sentences"),
    ([["O"]], [[0]], r"y_pred must be a list of sentences, each a list of tag strings"),
    ([], [], r"y_true has no tags"),
])
def test_bad_inputs(gold, predicted, message):
    with pytest.raises(ValueError, match=message):
        ner_metrics.entity_scores(gold, predicted)


def test_unknown_scheme():
    with pytest.raises(ValueError, match=r"scheme must be None .* or one of \('IOB1'"):
        ner_metrics.entity_scores([["O"]], [["O"]], scheme="BIO")
