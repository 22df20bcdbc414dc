"""Fixtures shared by the text tests: the real MiniLM vocabulary, SOTU sentences, a cased
vocabulary learned from SOTU, and a small vocabulary for exact expected outputs."""

import os
import re

import pytest
import tensorflow as tf

from keras_bert_suite.text import BertTokenizer
from keras_bert_suite.text import learn_vocabulary

# A deterministic sample: every SENTENCE_STRIDE-th sentence of the whole corpus (~3,200).
SENTENCE_STRIDE = 20


@pytest.fixture(scope="session")
def minilm_vocab(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


@pytest.fixture(scope="session")
def uncased_tokenizer(minilm_vocab):
    return BertTokenizer(minilm_vocab)


def split_sentences(paths):
    sentences = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                sentences += [s for s in re.split(r"(?<=[.!?])\s+", line.strip()) if s]
    return sentences


@pytest.fixture(scope="session")
def sotu_sentences(sotu_files):
    return split_sentences(sotu_files)[::SENTENCE_STRIDE]


@pytest.fixture(scope="session")
def cased_sotu_vocab(sotu_files, tmp_path_factory):
    """A cased WordPiece vocabulary learned from 20 real addresses (~10 s)."""
    path = str(tmp_path_factory.mktemp("cased_vocab") / "vocab.txt")
    # A loose size tolerance and fewer refinement passes keep tf-text's learner quick.
    lines = tf.data.TextLineDataset(sotu_files[-20:])
    learn_vocabulary(lines, 1500, output_path=path, lowercase=False, progress=False,
                     slack_ratio=0.2, num_iterations=2)
    return path


SMALL_VOCABULARY = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "quick", "brown", "fox", "jump", "##s", "##ed", "over", "lazy", "dog",
    "un", "##aff", "##able", "cafe", "naive", ",", ".", "!", "'", "-", "a", "##b", "中", "国",
]


@pytest.fixture(scope="session")
def small_tokenizer():
    return BertTokenizer(SMALL_VOCABULARY)

