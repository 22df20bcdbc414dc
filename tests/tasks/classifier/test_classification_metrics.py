"""Classification/regression metrics agree with scikit-learn and scipy on real predictions
(a TF-IDF + naive Bayes model of the Rotten Tomatoes corpus) and with small cases worked by
hand. Pure numpy: runs on every backend (seconds)."""

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from keras_bert_suite.data import corpora
from keras_bert_suite.tasks.classifier.data import read_classification_file
from keras_bert_suite.tasks.classifier import metric as m


@pytest.fixture(scope="module")
def real_predictions():
    """Held-out predictions of word TF-IDF + multinomial naive Bayes (fast to fit) on the real
    corpus, 3 classes (fresh, plot, rotten): class ids, probabilities [N, 3] and gold ids."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.naive_bayes import MultinomialNB

    examples = read_classification_file(corpora.fetch_rotten_tomatoes(), label_column="category",
                                        allow_empty_text=True)
    texts = np.asarray(examples.texts, dtype=object)
    order = np.random.default_rng(0).permutation(len(texts))
    test, train = order[:1500], order[1500:]
    vectorizer = TfidfVectorizer(sublinear_tf=True)
    model = MultinomialNB(alpha=0.1).fit(vectorizer.fit_transform(texts[train]),
                                         examples.labels[train])
    probabilities = model.predict_proba(vectorizer.transform(texts[test]))
    return probabilities.argmax(-1), probabilities, examples.labels[test]


@pytest.fixture(scope="module")
def binary_predictions(real_predictions):
    """The review sentences only, as fresh (1) vs rotten (0) by the larger probability."""
    _, probabilities, gold = real_predictions
    reviews = gold != 1
    fresh, rotten = probabilities[reviews, 0], probabilities[reviews, 2]
    fresh_score = fresh / (fresh + rotten)
    return (fresh_score > 0.5).astype(int), fresh_score, (gold[reviews] == 0).astype(int)


def test_binary_metrics_match_scikit_learn(binary_predictions):
    predicted, _, gold = binary_predictions
    assert 0.6 < m.accuracy(predicted, gold) < 0.95  # a real, imperfect model
    assert m.accuracy(predicted, gold) == pytest.approx(sk.accuracy_score(gold, predicted),
                                                        abs=1e-12)
    assert m.f1_score(predicted, gold) == pytest.approx(sk.f1_score(gold, predicted), abs=1e-12)
    assert m.f1_score(predicted, gold, positive_label=0) == pytest.approx(
        sk.f1_score(gold, predicted, pos_label=0), abs=1e-12)
    assert m.matthews_corrcoef(predicted, gold) == pytest.approx(
        sk.matthews_corrcoef(gold, predicted), abs=1e-12)


def test_multiclass_metrics_match_scikit_learn(real_predictions):
    predicted, _, gold = real_predictions
    assert len(np.unique(predicted)) == 3
    assert m.f1_score(predicted, gold, average="macro") == pytest.approx(
        sk.f1_score(gold, predicted, average="macro"), abs=1e-12)
    assert m.matthews_corrcoef(predicted, gold) == pytest.approx(
        sk.matthews_corrcoef(gold, predicted), abs=1e-12)
    # A class that is predicted but never gold (and the reverse) counts in the macro mean.
    shifted = np.where(predicted == 2, 3, predicted)
    assert m.f1_score(shifted, gold, average="macro") == pytest.approx(
        sk.f1_score(gold, shifted, average="macro"), abs=1e-12)


def test_correlations_match_scipy(binary_predictions, real_predictions):
    _, score, gold = binary_predictions
    _, probabilities, _ = real_predictions
    rounded = np.round(probabilities[:, 0] * 5) / 5  # many ties, like STS-B's 0..5 scores
    pairs = [(score, gold),  # scores against 0/1 labels: half the ranks are ties
             (probabilities[:, 0], probabilities[:, 2]),
             (rounded, probabilities[:, 2])]
    for x, y in pairs:
        assert m.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-10)
        assert m.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-10)
    np.testing.assert_allclose(m.average_ranks(rounded), stats.rankdata(rounded))


def test_exact_small_cases():
    """Worked by hand (no library in the expected values)."""
    assert m.accuracy([1, 0, 1], [1, 1, 1]) == pytest.approx(2 / 3)
    # macro F1 over classes {0, 1, 2}: predictions [0, 1, 1, 2], gold [0, 1, 2, 2]
    # class 0: tp 1 fp 0 fn 0 -> 1; class 1: tp 1 fp 1 fn 0 -> 2/3; class 2: tp 1 fp 0 fn 1
    # -> 2/3; mean 7/9
    assert m.f1_score([0, 1, 1, 2], [0, 1, 2, 2], average="macro") == pytest.approx(7 / 9)
    # positive label 0 on [1, 1, 0, 0] vs [1, 0, 1, 0]: tp 1 fp 1 fn 1 -> 1/2; and with
    # tp 2 fp 1 fn 0 (predictions [0, 0, 0, 1], gold [0, 0, 1, 1]) -> 4/5
    assert m.f1_score([0, 0, 0, 1], [0, 0, 1, 1], positive_label=0) == pytest.approx(0.8)
    assert m.f1_score([0, 0, 0, 1], [0, 0, 1, 1]) == pytest.approx(2 / 3)  # tp 1 fp 0 fn 1
    # Spearman with a tie: ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4], of [1, 3, 2, 4] are
    # [1, 3, 2, 4]; their Pearson correlation is 4.5 / sqrt(4.5 * 5) = sqrt(0.9)
    np.testing.assert_allclose(m.average_ranks([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
    assert m.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(np.sqrt(0.9))
    # Pearson of [1, 2, 3] and [2, 4, 7]: deviations (-1, 0, 1) and (-7/3, -1/3, 8/3):
    # sum of products 5, sums of squares 2 and 114/9 -> 5 / sqrt(228 / 9)
    assert m.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / np.sqrt(228 / 9))
    # tp=1, fp=1, fn=1, tn=1 -> F1 1/2, MCC 0; tp=2, fp=0, fn=1, tn=1 -> MCC 1/sqrt(3)
    assert m.f1_score([1, 1, 0, 0], [1, 0, 1, 0]) == 0.5
    assert m.matthews_corrcoef([1, 1, 0, 0], [1, 0, 1, 0]) == 0.0
    assert m.matthews_corrcoef([1, 1, 0, 0], [1, 1, 1, 0]) == pytest.approx(1 / np.sqrt(3))


def test_degenerate_inputs_follow_scikit_learn_and_scipy():
    gold = np.array([1, 0, 1, 1])
    constant = np.ones(4, dtype=int)
    assert m.matthews_corrcoef(constant, gold) == sk.matthews_corrcoef(gold, constant) == 0.0
    assert m.f1_score(np.zeros(4, int), np.zeros(4, int)) == 0.0  # no positives anywhere
    assert np.isnan(m.pearson(constant, gold)) and np.isnan(m.spearman(constant, gold))


def test_glue_metrics_per_task(binary_predictions):
    predicted, score, gold = binary_predictions
    logits = np.stack([1 - score, score], axis=1)  # [N, 2]: arg-maxed to `predicted`
    assert m.glue_metrics("mrpc", logits, gold) == {
        "f1": sk.f1_score(gold, predicted), "accuracy": sk.accuracy_score(gold, predicted)}
    assert m.glue_metrics("CoLA", predicted, gold) == {
        "matthews_corrcoef": pytest.approx(sk.matthews_corrcoef(gold, predicted))}
    assert m.glue_metrics("sst2", predicted, gold) == {
        "accuracy": pytest.approx(np.mean(predicted == gold), abs=1e-12)}
    # QQP as MRPC; MNLI's three classes: accuracy only (arg max of [N, 3] logits)
    assert m.glue_metrics("qqp", logits, gold) == {
        "f1": pytest.approx(sk.f1_score(gold, predicted)),
        "accuracy": pytest.approx(sk.accuracy_score(gold, predicted))}
    three = np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 3.0], [0.0, 5.0, 1.0], [1.0, 0.0, 0.5]])
    assert m.glue_metrics("mnli", three, [0, 1, 1, 0]) == {"accuracy": pytest.approx(0.75)}
    sts = m.glue_metrics("STS-B", 5 * score[:, None], 5 * gold.astype(float))
    assert sts == {"pearson": pytest.approx(stats.pearsonr(score, gold)[0]),
                   "spearman": pytest.approx(stats.spearmanr(score, gold)[0])}
    # AX: 3-class MCC; by hand from the confusion matrix C (gold rows, predicted columns):
    # C = [[1,0,0],[0,1,1],[0,0,1]], t = row sums (1,2,1), p = column sums (1,1,2), c = 3, s = 4
    # MCC = (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)) = (12 - 5) / sqrt(10 * 10) = 0.7
    assert m.glue_metrics("ax", [0, 1, 2, 2], [0, 1, 2, 1]) == {
        "matthews_corrcoef": pytest.approx(0.7, abs=1e-12)}


def test_bad_input_errors():
    with pytest.raises(ValueError, match="Unknown GLUE task 'sst3'"):
        m.glue_metrics("sst3", [1], [1])
    with pytest.raises(ValueError, match="3 predictions but 2 labels"):
        m.accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="must be 1-D.*argmax"):
        m.accuracy([[0.1, 0.9]], [1])
    with pytest.raises(ValueError, match="at least one example"):
        m.matthews_corrcoef([], [])
    with pytest.raises(ValueError, match="average must be"):
        m.f1_score([1], [1], average="micro")
