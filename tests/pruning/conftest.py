"""The real model the pruning tests share: MiniLM with a 2-class head, fine-tuned 2 steps on
16 Rotten Tomatoes sentences (built once per test process)."""

import keras
import pytest

from tests.conftest import alternating_reviews

PRESET = "minilm_l6_h384_uncased"


@pytest.fixture(scope="session")
def reviews():
    """16 real review sentences, alternately fresh (1) and rotten (0)."""
    return alternating_reviews(per_class=8)


@pytest.fixture(scope="session")
def classifier(reviews):
    from keras_bert_suite import BertClassifier

    keras.utils.set_random_seed(0)
    model = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32,
                                       label_names=["rotten", "fresh"])
    texts, labels = reviews
    model.compile(optimizer=keras.optimizers.Adam(1e-4))
    model.fit(texts, labels, epochs=1, batch_size=8, verbose=0)
    return model


@pytest.fixture(scope="session")
def inputs(classifier, reviews):
    """The reviews as encoder inputs [16, 32]."""
    return classifier.preprocessor(reviews[0])
