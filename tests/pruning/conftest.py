"""The real model the pruning tests share: MiniLM (real weights) with a 2-class head of
decisive random weights (built once per test process), and 16 Rotten Tomatoes sentences."""

import keras
import numpy as np
import pytest

from tests.conftest import alternating_reviews

PRESET = "minilm_l6_h384_uncased"


@pytest.fixture(scope="session")
def reviews():
    """16 real review sentences, alternately fresh (1) and rotten (0)."""
    return alternating_reviews(per_class=8)


@pytest.fixture(scope="session")
def classifier():
    from keras_bert_suite import BertClassifier

    keras.utils.set_random_seed(0)
    model = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32,
                                       label_names=["rotten", "fresh"])
    # Logits of a few units (a fresh head's are ~0.02): masking a head moves the loss by
    # far more than float32 rounding. No fine-tuning: no test here needs a trained head, and
    # compiling MiniLM's training step cost more than all the pruning checks together.
    kernel = model.classifier_head.kernel
    kernel.assign(np.random.default_rng(0).normal(scale=0.5, size=kernel.shape)
                  .astype("float32"))
    return model


@pytest.fixture(scope="session")
def inputs(classifier, reviews):
    """The reviews as encoder inputs [16, 32]."""
    return classifier.preprocessor(reviews[0])
