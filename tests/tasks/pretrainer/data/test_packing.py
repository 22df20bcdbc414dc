"""Packed pretraining rows (tasks/pretrainer/data/packing.py): first-fit placement, the rows'
exact features, masking per instance, the packed TFRecord schema and the Beam writer."""


import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data import corpus_buckets
from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import DynamicMasker
from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances
from keras_bert_suite.tasks.pretrainer.data.packing import (
    check_packing, instance_features, pack_instances)
from keras_bert_suite.tasks.pretrainer.data.tfrecords import (
    is_packed_tfrecord, packed_row_to_example, read_pretraining_tfrecords)

# tf.data and TFRecords only: the rows cannot depend on the Keras backend.
pytestmark = pytest.mark.needs_tf_graph


def _instances(lengths, width=8):
    """Unmasked instances whose tokens are 10 * (index + 1) + position."""
    token_ids = np.zeros((len(lengths), width), "int32")
    padding_mask = np.zeros((len(lengths), width), "int32")
    for index, length in enumerate(lengths):
        token_ids[index, :length] = 10 * (index + 1) + np.arange(length)
        padding_mask[index, :length] = 1
    return tf.data.Dataset.from_tensor_slices({
        "token_ids": token_ids, "segment_ids": padding_mask * (np.arange(width) % 2),
        "padding_mask": padding_mask, "nsp_labels": np.arange(len(lengths), dtype="int32") % 2})


def _rows(dataset):
    rows = list(dataset.as_numpy_iterator())
    return {name: np.stack([row[name] for row in rows]).tolist() for name in rows[0]}


def test_first_fit_rows_have_the_expected_features():
    # Lengths 5, 3, 6, 2, 7 in rows of 8, at most 2 instances: [5 + 3], [6 + 2], [7].
    rows = _rows(pack_instances(_instances([5, 3, 6, 2, 7]), sequence_length=8,
                                max_instances_per_row=2, max_predictions_per_row=4))
    assert rows["token_ids"] == [[10, 11, 12, 13, 14, 20, 21, 22],
                                 [30, 31, 32, 33, 34, 35, 40, 41],
                                 [50, 51, 52, 53, 54, 55, 56, 0]]
    assert rows["padding_mask"] == [[1, 1, 1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 1, 1, 2, 2],
                                    [1, 1, 1, 1, 1, 1, 1, 0]]
    assert rows["segment_ids"] == [[0, 1, 0, 1, 0, 0, 1, 0], [0, 1, 0, 1, 0, 1, 0, 1],
                                   [0, 1, 0, 1, 0, 1, 0, 0]]
    assert rows["nsp_labels"] == [[0, 1], [0, 1], [0, 0]]
    assert rows["nsp_weights"] == [[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]]
    # First fit, not next fit: the 2-token instance goes back to the first row with room.
    rows = _rows(pack_instances(_instances([5, 6, 2]), 8, 3, 4))
    assert rows["padding_mask"] == [[1, 1, 1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 1, 1, 0, 0]]


def test_rows_keep_room_for_the_predictions_masking_will_make():
    # Each instance gets 1 prediction (max(1, round(n * 0.15))): 2 per row at most here.
    rows = _rows(pack_instances(_instances([2, 2, 2, 2, 2]), 8, 4, max_predictions_per_row=2))
    assert rows["padding_mask"] == [[1, 1, 2, 2, 0, 0, 0, 0]] * 2 + [[1, 1, 0, 0, 0, 0, 0, 0]]


def test_statically_masked_predictions_move_with_their_instance():
    features = {
        "token_ids": np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32"),
        "segment_ids": np.zeros((2, 4), "int32"),
        "padding_mask": np.array([[1, 1, 1, 0], [1, 1, 0, 0]], "int32"),
        "mask_positions": np.array([[1, 2], [1, 0]], "int32"),
        "mlm_labels": np.array([[61, 71], [91, 0]], "int32"),
        "mlm_weights": np.array([[1.0, 1.0], [1.0, 0.0]], "float32")}
    rows = _rows(pack_instances(tf.data.Dataset.from_tensor_slices(features), 6, 2, 4))
    assert rows["mask_positions"] == [[1, 2, 4, 0]]
    assert rows["mlm_labels"] == [[61, 71, 91, 0]]
    assert rows["mlm_weights"] == [[1.0, 1.0, 1.0, 0.0]]
    assert "nsp_labels" not in rows  # MLM-only instances have none


def test_bad_packing_settings_and_instances_get_clear_errors():
    with pytest.raises(ValueError, match="max_instances_per_row must be a positive integer"):
        check_packing(128, 0, 20)
    with pytest.raises(ValueError, match="sequence_length must be a positive integer"):
        pack_instances(_instances([3]), 0, 2, 4)
    with pytest.raises(ValueError, match="flat dicts of instance features"):
        pack_instances(tf.data.Dataset.range(3), 8, 2, 4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than sequence_length=6"):
        list(pack_instances(_instances([7]), 6, 2, 4))


@pytest.fixture(scope="module")
def real_instances(sotu_documents, uncased_tokenizer):
    """Unmasked instances of real text, of varied lengths (a random target length for every
    document)."""
    return create_pretraining_instances(sotu_documents, uncased_tokenizer, 128,
                                        dupe_factor=1, short_seq_prob=1.0,
                                        static_masking=False, seed=1)[:48]


def test_dynamic_masking_masks_each_instance_of_a_packed_row_as_alone(real_instances,
                                                                      uncased_tokenizer):
    features = instance_features(real_instances, 128, 20, masked=False)
    rows = pack_instances(tf.data.Dataset.from_tensor_slices(features), 128, 3, 20)
    masker = DynamicMasker.from_tokenizer(uncased_tokenizer, max_predictions_per_seq=20)
    x, y = masker(next(iter(rows.batch(64))), seed=tf.constant([3, 4], tf.int64))
    x, y = {k: v.numpy() for k, v in x.items()}, {k: v.numpy() for k, v in y.items()}
    assert (x["padding_mask"].max(axis=1) > 1).any()  # some rows hold several instances
    specials = [uncased_tokenizer.cls_token_id, uncased_tokenizer.sep_token_id]
    for row in range(len(x["token_ids"])):
        positions = x["mask_positions"][row][y["mlm_weights"][row] > 0]
        instances = x["padding_mask"][row]
        for number in range(1, instances.max() + 1):
            length = (instances == number).sum()
            # Each instance gets the count it gets alone, inside its own tokens.
            assert (instances[positions] == number).sum() == min(20, max(1, round(length * 0.15)))
        assert (instances[positions] > 0).all()
    original = y["mlm_labels"][y["mlm_weights"] > 0]
    assert not np.isin(original, specials).any()
    np.testing.assert_array_equal(y["nsp_weights"].sum(), len(real_instances))


def test_packed_tfrecords_round_trip_and_are_told_apart(tmp_path, real_instances):
    features = instance_features(real_instances[:12], 128, 20, masked=False)
    rows = list(pack_instances(tf.data.Dataset.from_tensor_slices(features), 128, 3, 20)
                .as_numpy_iterator())
    path = str(tmp_path / "packed.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for row in rows:
            writer.write(packed_row_to_example(row, 20).SerializeToString())
    assert is_packed_tfrecord(path)
    back = list(read_pretraining_tfrecords(path, 128, 20, shuffle=False,
                                           max_instances_per_row=3).as_numpy_iterator())
    assert len(back) == len(rows)
    for row, read in zip(rows, back):
        for name, value in row.items():
            np.testing.assert_array_equal(read[name], value, err_msg=name)
        np.testing.assert_array_equal(read["mlm_weights"], np.zeros(20))
    # A reader of the original schema refuses them (no input_mask, K labels) ...
    with pytest.raises(tf.errors.InvalidArgumentError, match="parse|input_mask"):
        list(read_pretraining_tfrecords(path, 128, 20, shuffle=False))
    # ... and original records are not taken for packed ones.
    from keras_bert_suite.tasks.pretrainer.data.tfrecords import write_pretraining_tfrecords

    original = str(tmp_path / "original.tfrecord")
    write_pretraining_tfrecords(real_instances[:2], original)
    assert not is_packed_tfrecord(original)


def test_the_beam_writer_packs_a_shuffled_bucket(tmp_path, sotu_documents, uncased_tokenizer):
    settings = corpus_buckets.PretrainingDataSettings(
        vocabulary=tuple(uncased_tokenizer.get_vocabulary()), layout="paragraph_per_line",
        dupe_factor=1, sequence_length=128, short_seq_prob=1.0, max_instances_per_row=3)
    writer = corpus_buckets.BucketWriter(settings, str(tmp_path))
    statistics = corpus_buckets.new_statistics()
    path = writer.write_bucket("train", "00000-0000", ("train", 0, 0), sotu_documents[:3],
                               statistics)
    rows = list(read_pretraining_tfrecords(path, 128, 20, shuffle=False,
                                           max_instances_per_row=3).as_numpy_iterator())
    assert len(rows) == statistics["train_rows"] < statistics["train_instances"]
    assert sum(row["nsp_weights"].sum() for row in rows) == statistics["train_instances"]
    assert sum((row["padding_mask"] > 0).sum() for row in rows) == statistics["instance_tokens"]
    for row in rows:  # statically masked per instance: positions inside the row's tokens
        positions = row["mask_positions"][row["mlm_weights"] > 0]
        assert (row["padding_mask"][positions] > 0).all()
