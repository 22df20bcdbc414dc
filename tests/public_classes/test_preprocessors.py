"""The text layers through `run_preprocessor_test`: config round trip, the same output in a
tf.data graph, eagerly and from the rebuilt layer, on every Keras backend. Expected ids are
looked up by hand in the real uncased vocab.txt (words chosen to be whole vocabulary
tokens), positions counted by hand."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertPreprocessor, BertTokenizer, SegmentPacker
from keras_bert_suite.presets import packaged_checkpoint_dir
from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor
from keras_bert_suite.tasks.token_classifier.preprocessor import TokenClassifierPreprocessor
from tests.harness import run_preprocessor_test

PRESET = "bert_uncased_L-2_H-128_A-2"
IGNORE = -100


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_preset(PRESET)


@pytest.fixture(scope="module")
def ids():
    """token -> id from the vocab.txt the uncased preset uses (id = line number)."""
    path = os.path.join(packaged_checkpoint_dir("all-MiniLM-L6-v2"), "vocab.txt")
    with open(path, encoding="utf-8") as file:
        vocabulary = file.read().splitlines()
    index = {token: i for i, token in enumerate(vocabulary)}
    return lambda text: [index[token] for token in text.split(" ")]


def _padded(row, length, value=0):
    return row + [value] * (length - len(row))


def test_bert_tokenizer(tokenizer, ids):
    output = run_preprocessor_test(tokenizer, ["Hello, world!", "The film is a good drama."])
    assert output.to_list() == [ids("hello , world !"), ids("the film is a good drama .")]


def test_segment_packer():
    packer = SegmentPacker(sequence_length=8, cls_token_id=101, sep_token_id=102,
                           pad_token_id=0, truncate="longest_first")
    a = tf.ragged.constant([[5, 6, 7], [5]], dtype=tf.int32)
    b = tf.ragged.constant([[8, 9], [8, 9, 10, 11, 12]], dtype=tf.int32)
    # Row 1 needs 1 + 5 + 3 = 9 > 8: longest first drops b's last piece.
    run_preprocessor_test(packer, (a, b), expected_output={
        "token_ids": np.array([[101, 5, 6, 7, 102, 8, 9, 102],
                               [101, 5, 102, 8, 9, 10, 11, 102]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]], "int32"),
        "padding_mask": np.ones((2, 8), "int32")})


def test_segment_packer_roberta_layout():
    packer = SegmentPacker(sequence_length=10, cls_token_id=0, sep_token_id=2,
                           pad_token_id=1, truncate="longest_first", layout="roberta")
    a = tf.ragged.constant([[5, 6, 7], [5]], dtype=tf.int32)
    b = tf.ragged.constant([[8, 9], [8, 9, 10, 11, 12, 13]], dtype=tf.int32)
    # <s> a </s></s> b </s>: row 1 needs 4 + 1 + 6 = 11 > 10, so b loses its last piece.
    run_preprocessor_test(packer, (a, b), expected_output={
        "token_ids": np.array([[0, 5, 6, 7, 2, 2, 8, 9, 2, 1],
                               [0, 5, 2, 2, 8, 9, 10, 11, 12, 2]], "int32"),
        "segment_ids": np.zeros((2, 10), "int32"),
        "padding_mask": np.array([[1] * 9 + [0], [1] * 10], "int32")})


def test_bert_preprocessor(tokenizer, ids):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=12, truncate="longest_first")
    row = ids("[CLS] hello , world ! [SEP] a good drama . [SEP]")  # 11 of 12
    run_preprocessor_test(
        preprocessor, (["Hello, world!"], ["A good drama."]), call_kwargs={"y": np.array([1])},
        expected_output=({"token_ids": np.array([_padded(row, 12)], "int32"),
                          "segment_ids": np.array([[0] * 6 + [1] * 5 + [0]], "int32"),
                          "padding_mask": np.array([[1] * 11 + [0]], "int32")},
                         np.array([1])))


def test_multiple_choice_preprocessor(tokenizer, ids):
    preprocessor = MultipleChoicePreprocessor(tokenizer, sequence_length=8)
    first = _padded(ids("[CLS] hello world [SEP] good [SEP]"), 8)
    second = _padded(ids("[CLS] hello world [SEP] drama . [SEP]"), 8)
    run_preprocessor_test(
        preprocessor, (["Hello world"], [["good", "drama."]]), call_kwargs={"y": np.array([0])},
        expected_output=({"token_ids": np.array([[first, second]], "int32"),
                          "segment_ids": np.array([[[0, 0, 0, 0, 1, 1, 0, 0],
                                                    [0, 0, 0, 0, 1, 1, 1, 0]]], "int32"),
                          "padding_mask": np.array([[[1] * 6 + [0] * 2,
                                                     [1] * 7 + [0]]], "int32")},
                         np.array([0])))


def test_span_labeler_preprocessor(tokenizer, ids):
    preprocessor = SpanLabelerPreprocessor(tokenizer, sequence_length=16, doc_stride=4,
                                           max_question_length=4)
    context = "It was written by Anna."
    row = ids("[CLS] who wrote it ? [SEP] it was written by anna . [SEP]")  # 13 of 16
    # "anna" is context piece 4, after [CLS] + 4 question pieces + [SEP]: position 10.
    run_preprocessor_test(
        preprocessor, (["Who wrote it?"], [context]),
        call_kwargs={"y": {"answer_start": [context.index("Anna")], "answer_text": ["Anna"]}},
        expected_output=({"token_ids": np.array([_padded(row, 16)], "int32"),
                          "segment_ids": np.array([[0] * 6 + [1] * 7 + [0] * 3], "int32"),
                          "padding_mask": np.array([[1] * 13 + [0] * 3], "int32")},
                         {"start_positions": np.array([10], "int32"),
                          "end_positions": np.array([10], "int32")}))


def test_token_classifier_preprocessor(tokenizer, ids):
    preprocessor = TokenClassifierPreprocessor(tokenizer, sequence_length=8)
    row = ids("[CLS] paris is nice [SEP]")
    run_preprocessor_test(
        preprocessor, [["Paris", "is", "nice"]], call_kwargs={"y": [[1, 0, 2]]},
        expected_output=({"token_ids": np.array([_padded(row, 8)], "int32"),
                          "segment_ids": np.zeros((1, 8), "int32"),
                          "padding_mask": np.array([[1] * 5 + [0] * 3], "int32")},
                         np.array([[IGNORE, 1, 0, 2] + [IGNORE] * 4], "int32")))
