"""Length buckets (text/length_buckets.py): the boundaries, and batches of real Rotten Tomatoes
sentences cut to them without losing a row or a real token."""

import math

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertPreprocessor
from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
from keras_bert_suite.text.length_buckets import (
    bucket_boundaries, bucketed_batches, cut_to_bucket, rows_dataset, row_lengths)

needs_tf_graph = pytest.mark.needs_tf_graph
NUM_SENTENCES = 800
BATCH = 32


def test_auto_boundaries_are_two_shapes_per_doubling():
    assert bucket_boundaries(64) == (16, 24, 32, 48, 64)
    assert bucket_boundaries(384) == (16, 24, 32, 48, 64, 96, 128, 192, 256, 384)
    assert bucket_boundaries(100) == (16, 24, 32, 48, 64, 96, 100)
    assert bucket_boundaries(12) == (12,)
    assert bucket_boundaries(64, [8, 40]) == (8, 40, 64)
    assert bucket_boundaries(64, (16, 64)) == (16, 64)
    # a step that runs any shape: every multiple of the step (1: every length)
    assert bucket_boundaries(12, step=1) == tuple(range(1, 13))
    assert bucket_boundaries(30, step=8) == (8, 16, 24, 30)
    assert bucket_boundaries(64, step=8) == (8, 16, 24, 32, 40, 48, 56, 64)
    assert bucket_boundaries(64, [8, 40], step=1) == (8, 40, 64)


def test_steps_compiled_per_shape_keep_few_shapes():
    import keras

    from keras_bert_suite.text.length_buckets import length_step

    assert length_step(True) is None
    on_a_gpu = bool(tf.config.list_physical_devices("GPU"))
    expected = {"jax": None, "torch": 1, "tensorflow": None if on_a_gpu else 8}
    assert length_step("auto") == expected[keras.backend.backend()]
    assert length_step(False) == {**expected, "tensorflow": 8}[keras.backend.backend()]


@pytest.mark.parametrize("boundaries, message", [
    ([16, 16, 32], "strictly increasing"),
    ([32, 16], "strictly increasing"),
    ([16, 128], "go past sequence_length=64"),
    ([0, 16], "positive integers"),
    ([16.5], "positive integers"),
    ("longest", 'must be "auto"'),
])
def test_bad_boundaries_say_what_is_wrong(boundaries, message):
    with pytest.raises(ValueError, match=message):
        bucket_boundaries(64, boundaries)


@pytest.fixture(scope="module")
def review_rows():
    """Real review sentences packed to 64 by the MiniLM preprocessor, and their labels."""
    texts, labels = load_rotten_tomatoes()
    preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased", sequence_length=64)
    inputs = {k: np.asarray(v) for k, v in preprocessor(list(texts[:NUM_SENTENCES])).items()}
    return inputs, np.arange(NUM_SENTENCES)  # "labels": row numbers, to follow every row


def _epoch(batches):
    shapes, rows, real_tokens, padded = [], [], 0, 0
    for inputs, labels in batches:
        shapes.append(tuple(inputs["token_ids"].shape))
        rows += labels.numpy().tolist()
        real_tokens += int(tf.reduce_sum(inputs["padding_mask"]))
        padded += int(tf.size(inputs["padding_mask"]))
        # the cut keeps every real token: the longest row fits, and its bucket is the least
        longest = int(tf.reduce_max(row_lengths(inputs)))
        length = shapes[-1][1]
        assert length in bucket_boundaries(64) and longest <= length
        assert length == min(b for b in bucket_boundaries(64) if b >= longest)
    return shapes, rows, real_tokens, padded


@needs_tf_graph
def test_every_row_once_per_epoch_cut_to_its_bucket(review_rows):
    inputs, labels = review_rows
    real = int(inputs["padding_mask"].sum())
    runs = {}
    for name, group in (("plain", 0), ("grouped", 50)):
        batches = bucketed_batches(rows_dataset((inputs, labels)), BATCH, bucket_boundaries(64),
                                   shuffle=True, seed=3, group_batches=group)
        assert int(batches.cardinality()) == math.ceil(NUM_SENTENCES / BATCH)
        first, second = _epoch(batches), _epoch(batches)
        for shapes, rows, real_tokens, _ in (first, second):
            assert sorted(rows) == list(range(NUM_SENTENCES))  # each row once, none lost
            assert real_tokens == real
            assert len(shapes) == math.ceil(NUM_SENTENCES / BATCH)
        assert first[1] != second[1]  # reshuffled every epoch
        runs[name] = first[3]
    fixed = NUM_SENTENCES * 64
    # Real reviews average ~28 tokens of 64: random batches still pad to their longest row,
    # grouped ones to about their own length.
    assert real / fixed < 0.5
    assert runs["grouped"] < 0.75 * runs["plain"] < 0.75 * fixed
    assert runs["grouped"] < 1.3 * real


@needs_tf_graph
def test_every_length_boundaries_cut_each_batch_to_its_longest_row(review_rows):
    inputs, labels = review_rows
    batches = bucketed_batches(rows_dataset((inputs, labels)), BATCH,
                               bucket_boundaries(64, step=1), shuffle=True, seed=3,
                               group_batches=50)
    padded = rows = 0
    for x, y in batches:
        assert x["token_ids"].shape[1] == int(tf.reduce_max(row_lengths(x)))
        padded += int(tf.size(x["padding_mask"]))
        rows += len(y)
    assert rows == NUM_SENTENCES
    # grouped by length and cut exactly: within 6% of the real tokens (the buckets: < 30%)
    assert padded < 1.06 * int(inputs["padding_mask"].sum())


@needs_tf_graph
def test_without_boundaries_batches_keep_the_full_length(review_rows):
    inputs, labels = review_rows
    batches = bucketed_batches(rows_dataset((inputs, labels)), BATCH, None)
    shapes, rows, _, _ = zip(*[(tuple(x["token_ids"].shape), y.numpy().tolist(), 0, 0)
                               for x, y in batches])
    assert {shape[1] for shape in shapes} == {64}
    assert sum(rows, []) == list(range(NUM_SENTENCES))  # in order without shuffle


@needs_tf_graph
def test_per_token_labels_and_choices_are_cut_on_their_token_axis():
    mask = np.array([[1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0]], np.int32)
    inputs = {"token_ids": mask * 7, "segment_ids": 0 * mask, "padding_mask": mask}
    labels = np.where(mask == 1, 2, -100)
    cut_inputs, cut_labels = cut_to_bucket((inputs, labels), (4, 6, 8), per_token_labels=True)
    assert cut_inputs["token_ids"].shape == (2, 6) and cut_labels.shape == (2, 6)
    np.testing.assert_array_equal(cut_labels, labels[:, :6])
    # multiple choice [B, C, T]: the longest choice decides
    choices = {k: np.stack([v, v[::-1]])[:, :, :] for k, v in inputs.items()}  # [2, 2, 8]
    choices["padding_mask"][0, 0, :7] = 1
    cut = cut_to_bucket(choices, (4, 6, 8))
    assert cut["token_ids"].shape == (2, 2, 8)
    cut = cut_to_bucket({k: v[1:] for k, v in choices.items()}, (4, 6, 8))
    assert cut["padding_mask"].shape == (1, 2, 6)


def test_bad_batching_arguments_are_refused():
    rows = rows_dataset(({"padding_mask": np.ones((4, 8), np.int32)},))
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        bucketed_batches(rows, 0, (8,))
    with pytest.raises(ValueError, match="group_by_length must be a number of batches"):
        bucketed_batches(rows, 2, (8,), group_batches=-1)
