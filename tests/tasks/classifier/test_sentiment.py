"""Rotten Tomatoes sentences: loading, the reference split and the TF-IDF baseline on real data."""

import collections

import numpy as np
import pytest

from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
from keras_bert_suite.tasks.classifier.rotten_tomatoes import split_held_out
from keras_bert_suite.tasks.classifier.rotten_tomatoes import tfidf_baseline


@pytest.fixture(scope="module")
def corpus():
    return load_rotten_tomatoes()


def test_load(corpus):
    texts, labels = corpus
    assert len(texts) == len(labels) == 12808
    assert labels.dtype == np.int32
    assert np.bincount(labels).tolist() == [5405, 7403]  # rotten, fresh
    assert (texts[0], labels[0]) == ("A three-hour cinema master class.", 1)


def test_split_is_reproducible_and_complete(corpus):
    texts, labels = corpus
    (train_texts, train_labels), (test_texts, test_labels) = split_held_out(texts, labels)
    assert len(test_texts) == 2000 and len(train_texts) == 10808
    # Every sentence lands in exactly one part (as a multiset: a few sentences repeat).
    counts = collections.Counter
    assert counts(train_texts) + counts(test_texts) == counts(texts)
    assert sorted(np.concatenate([train_labels, test_labels])) == sorted(labels)
    (_, _), (again, _) = split_held_out(texts, labels)
    (_, _), (other, _) = split_held_out(texts, labels, seed=1)
    assert again == test_texts and other != test_texts
    index = {text: i for i, text in enumerate(texts)}
    first = index[test_texts[0]]
    assert first == np.random.default_rng(0).permutation(len(texts))[0]  # numpy default_rng(0)
    with pytest.raises(ValueError, match="held_out=12808 must be between 1 and 12807"):
        split_held_out(texts, labels, held_out=12808)


def test_unknown_category_names_the_line(tmp_path):
    path = tmp_path / "reviews.csv"
    path.write_text("category,text,movie_name\nfresh,A gem.,x\nmeh,So-so.,y\n")
    with pytest.raises(ValueError, match=r"reviews\.csv, line 3: unknown label 'meh'; known labels "
                                         r"are \['plot', 'rotten', 'fresh'\]"):
        load_rotten_tomatoes(str(path))


@pytest.mark.real
@pytest.mark.slow  # ~8 s of CPU: TF-IDF of 10.8k sentences with char 2-5-grams
def test_tfidf_baseline_on_the_reference_split(corpus):
    (train_texts, train_labels), (test_texts, test_labels) = split_held_out(*corpus)
    predictions = tfidf_baseline(train_texts, train_labels, test_texts)
    accuracy = float(np.mean(predictions == test_labels))
    majority = max(test_labels.mean(), 1 - test_labels.mean())
    # docs/benchmarks.md: 79.2% on this split; far above always saying "fresh".
    assert 0.76 < accuracy < 0.83 and accuracy > majority + 0.15
