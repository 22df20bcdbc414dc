"""SegmentPacker: exact packed outputs, both truncation strategies against their references."""

import random

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.text import SegmentPacker
from keras_bert_suite.text import truncation

needs_tf_graph = pytest.mark.needs_tf_graph
CLS, SEP, PAD = 101, 102, 0


def pack(segments, sequence_length, truncate="round_robin"):
    packer = SegmentPacker(sequence_length, CLS, SEP, PAD, truncate=truncate)
    return packer(tuple(tf.ragged.constant(s, dtype=tf.int32) for s in segments))


@needs_tf_graph
def test_pair_round_robin_exact():
    out = pack([[[1, 2, 3, 4, 5], [6]], [[7, 8, 9], [10, 11]]], sequence_length=8)
    np.testing.assert_array_equal(out["token_ids"], [
        [CLS, 1, 2, 3, SEP, 7, 8, SEP],  # budget 5: a gets 3, b gets 2 (a is first in turn)
        [CLS, 6, SEP, 10, 11, SEP, PAD, PAD]])
    np.testing.assert_array_equal(out["segment_ids"], [
        [0, 0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 1, 1, 1, 0, 0]])
    np.testing.assert_array_equal(out["padding_mask"], [
        [1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0, 0]])
    assert all(v.dtype == np.int32 and v.shape == (2, 8) for v in out.values())


@needs_tf_graph
def test_pair_longest_first_exact():
    # Budget 5 for lengths (5, 3): both are cut to 2 and the odd token goes to the longer one.
    out = pack([[[1, 2, 3, 4, 5]], [[7, 8, 9]]], sequence_length=8, truncate="longest_first")
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, 2, 3, SEP, 7, 8, SEP]])
    # Equal lengths, odd budget: the second segment keeps the extra token (as `tokenizers`).
    out = pack([[[1, 2, 3, 4]], [[7, 8, 9, 10]]], sequence_length=8, truncate="longest_first")
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, 2, SEP, 7, 8, 9, SEP]])
    out = pack([[[1, 2, 3, 4]], [[7, 8, 9, 10]]], sequence_length=8, truncate="round_robin")
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, 2, 3, SEP, 7, 8, SEP]])


@needs_tf_graph
def test_single_segment_and_three_segments():
    out = pack([[[1, 2, 3, 4, 5, 6], []]], sequence_length=5)
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, 2, 3, SEP], [CLS, SEP, PAD, PAD, PAD]])
    out = pack([[[1, 2, 3]], [[4, 5, 6]], [[7, 8, 9]]], sequence_length=9)
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, 2, SEP, 4, 5, SEP, 7, SEP]])
    np.testing.assert_array_equal(out["segment_ids"], [[0, 0, 0, 0, 1, 1, 1, 2, 2]])


@needs_tf_graph
def test_empty_segments_and_an_empty_batch():
    # Positions outside a segment read past its ids: an empty segment or batch must not fail.
    out = pack([[[], [1, 2]], [[], []]], sequence_length=6)
    np.testing.assert_array_equal(out["token_ids"], [[CLS, SEP, SEP, 0, 0, 0],
                                                     [CLS, 1, 2, SEP, SEP, 0]])
    np.testing.assert_array_equal(out["segment_ids"], [[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0]])
    np.testing.assert_array_equal(out["padding_mask"], [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]])
    empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    out = SegmentPacker(6, CLS, SEP)((empty, empty))
    assert {name: value.shape for name, value in out.items()} == {
        "token_ids": (0, 6), "segment_ids": (0, 6), "padding_mask": (0, 6)}


@needs_tf_graph
@pytest.mark.parametrize("truncate", truncation.STRATEGIES)
def test_never_drops_a_segment(truncate):
    out = pack([[[1] * 50], [[2] * 50], [[3] * 50]], sequence_length=7, truncate=truncate)
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, SEP, 2, SEP, 3, SEP]])


@needs_tf_graph
def test_single_example_and_dense_inputs():
    packer = SegmentPacker(6, CLS, SEP)
    out = packer((tf.constant([1, 2]), tf.constant([3, 4, 5])))
    np.testing.assert_array_equal(out["token_ids"], [CLS, 1, 2, SEP, 3, SEP])
    out = packer(np.array([[1, 2], [3, 4]], np.int64))
    np.testing.assert_array_equal(out["token_ids"], [[CLS, 1, 2, SEP, 0, 0], [CLS, 3, 4, SEP, 0, 0]])


@needs_tf_graph
def test_round_robin_matches_tf_text_trimmer():
    import tensorflow_text as tf_text

    rng = random.Random(0)
    for _ in range(60):
        num_segments = rng.randint(1, 3)
        lengths = tf.constant([[rng.randint(0, 12) for _ in range(num_segments)] for _ in range(8)])
        budget = rng.randint(num_segments, 20)
        segments = [tf.ragged.range(lengths[:, i]) for i in range(num_segments)]
        expected = [t.row_lengths() for t in tf_text.RoundRobinTrimmer(budget).trim(segments)]
        np.testing.assert_array_equal(truncation.allocate(lengths, budget, "round_robin"),
                                      tf.stack(expected, axis=1))


@needs_tf_graph
def test_longest_first_matches_tokenizers():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4},
                                           unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    cases = [(n1, n2) for n1 in range(13) for n2 in range(13)]
    for sequence_length in (5, 8, 11, 14):
        tokenizer.enable_truncation(max_length=sequence_length, strategy="longest_first")
        expected = [(e.ids.count(3), e.ids.count(4)) for e in tokenizer.encode_batch(
            [(" ".join("a" * n1), " ".join("b" * n2)) for n1, n2 in cases])]
        kept = truncation.allocate(tf.constant(cases, tf.int32), sequence_length - 3, "longest_first")
        assert [tuple(k) for k in kept.numpy().tolist()] == expected


@needs_tf_graph
def test_bad_arguments():
    with pytest.raises(ValueError, match="too small for 1 segment"):
        SegmentPacker(2, CLS, SEP)
    with pytest.raises(ValueError, match=r"too small for 2 segment.*need 5"):
        SegmentPacker(4, CLS, SEP)((tf.constant([[1]]), tf.constant([[2]])))
    with pytest.raises(ValueError, match="truncate must be one of"):
        SegmentPacker(8, CLS, SEP, truncate="middle")
    with pytest.raises(ValueError, match="integer token ids"):
        SegmentPacker(8, CLS, SEP)(tf.constant([["a"]]))
    with pytest.raises(ValueError, match="must all be batched"):
        SegmentPacker(8, CLS, SEP)((tf.constant([1]), tf.constant([[2]])))


@needs_tf_graph
def test_graph_uses_core_ops_only():
    packer = SegmentPacker(16, CLS, SEP)
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    graph = tf.function(lambda a, b: packer((a, b))).get_concrete_function(spec, spec).graph
    ops = {node.op for node in graph.as_graph_def().node}
    assert all(hasattr(tf.raw_ops, op) for op in ops), sorted(o for o in ops if not hasattr(tf.raw_ops, o))


def test_keras_round_trip_and_tf_data(tmp_path):
    packer = SegmentPacker(8, CLS, SEP, PAD, truncate="longest_first")
    path = str(tmp_path / "packer.keras")
    keras.saving.save_model(packer, path)
    restored = keras.saving.load_model(path)
    assert restored.get_config() == packer.get_config()
    segments = (tf.ragged.constant([[1, 2, 3, 4, 5]]), tf.ragged.constant([[7, 8, 9]]))
    np.testing.assert_array_equal(restored(segments)["token_ids"], packer(segments)["token_ids"])
    dataset = tf.data.Dataset.from_tensor_slices(segments).map(lambda a, b: restored((a, b)))
    first = next(iter(dataset))
    assert isinstance(first["token_ids"], tf.Tensor)
    np.testing.assert_array_equal(first["token_ids"], [CLS, 1, 2, 3, SEP, 7, 8, SEP])
