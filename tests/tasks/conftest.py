"""Shared fixtures for the task tests: the real uncased vocabulary and a small SOTU subset."""

import pytest

from keras_bert_suite.tasks.pretrainer.data.documents import read_documents


@pytest.fixture(scope="session")
def uncased_tokenizer():
    from keras_bert_suite.text import BertTokenizer

    return BertTokenizer.from_preset("minilm_l6_h384_uncased")


@pytest.fixture(scope="session")
def sotu_documents(sotu_files):
    """8 real State of the Union addresses, split into sentences (one document each)."""
    return list(read_documents(sotu_files[::29][:8], layout="paragraph_per_line"))
