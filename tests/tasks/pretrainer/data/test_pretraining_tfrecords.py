import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data.instances import PretrainingInstance
from keras_bert_suite.tasks.pretrainer.data.tfrecords import (
    FEATURE_NAMES, pretraining_model_inputs, read_pretraining_tfrecords, restore_unmasked_ids,
    write_pretraining_tfrecords)

pytestmark = pytest.mark.needs_tf_graph


def _instances(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a, b = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        ids = [101, *rng.integers(1000, 2000, a).tolist(), 102,
               *rng.integers(1000, 2000, b).tolist(), 102]
        positions = sorted(rng.choice(np.arange(1, len(ids) - 1), 2, replace=False).tolist())
        labels = [ids[p] for p in positions]
        masked = list(ids)
        for p in positions:
            masked[p] = 103
        out.append(PretrainingInstance(masked, [0] * (a + 2) + [1] * (b + 1),
                                       bool(rng.integers(2)), positions, labels))
    return out


def test_round_trip_in_original_schema(tmp_path):
    instances = _instances(11)
    files = [str(tmp_path / f"shard-{i}.tfrecord") for i in range(2)]
    assert write_pretraining_tfrecords(instances, files, sequence_length=24,
                                       max_predictions_per_seq=5) == 11

    # The raw records: exactly google-research/bert's features and types.
    record = next(iter(tf.data.TFRecordDataset(files[0])))
    example = tf.train.Example.FromString(record.numpy())
    features = example.features.feature
    assert sorted(features) == sorted(FEATURE_NAMES)
    assert features["masked_lm_weights"].WhichOneof("kind") == "float_list"
    for name in set(FEATURE_NAMES) - {"masked_lm_weights"}:
        assert features[name].WhichOneof("kind") == "int64_list"
    first = instances[0]
    n = len(first.token_ids)
    assert list(features["input_ids"].int64_list.value) == first.token_ids + [0] * (24 - n)
    assert list(features["input_mask"].int64_list.value) == [1] * n + [0] * (24 - n)
    assert list(features["masked_lm_weights"].float_list.value) == [1, 1, 0, 0, 0]

    # Unshuffled reading interleaves the shards back into the written (round-robin) order.
    read = list(read_pretraining_tfrecords(files, 24, 5, shuffle=False, cycle_length=2)
                .as_numpy_iterator())
    assert len(read) == 11
    for inst, got in zip(instances, read):
        n = len(inst.token_ids)
        np.testing.assert_array_equal(got["token_ids"][:n], inst.token_ids)
        assert not got["token_ids"][n:].any() and got["padding_mask"].sum() == n
        np.testing.assert_array_equal(got["segment_ids"][:n], inst.segment_ids)
        np.testing.assert_array_equal(got["mask_positions"][:2], inst.masked_lm_positions)
        np.testing.assert_array_equal(got["mlm_labels"][:2], inst.masked_lm_ids)
        np.testing.assert_array_equal(got["mlm_weights"], [1, 1, 0, 0, 0])
        assert got["nsp_labels"] == int(inst.is_random_next)
        assert got["token_ids"].dtype == np.int32 and got["mlm_weights"].dtype == np.float32
        restored = restore_unmasked_ids({k: tf.constant(v) for k, v in got.items()}).numpy()
        assert 103 not in restored[:n]

    x, y = pretraining_model_inputs(read[0])
    assert sorted(x) == ["mask_positions", "padding_mask", "segment_ids", "token_ids"]
    assert sorted(y) == ["mlm_labels", "mlm_weights", "nsp_labels"]


def test_shuffled_sharded_reading_is_seeded_and_streams(tmp_path):
    files = [str(tmp_path / f"s-{i}.tfrecord") for i in range(3)]
    write_pretraining_tfrecords(_instances(30), files, 24, 5)

    def order(seed):
        ds = read_pretraining_tfrecords(str(tmp_path / "s-*.tfrecord"), 24, 5,
                                        shuffle_buffer_size=8, seed=seed)
        return [tuple(f["token_ids"][:4]) for f in ds.as_numpy_iterator()]

    assert order(1) == order(1)
    assert sorted(order(1)) == sorted(order(2)) and order(1) != order(2)
    repeated = read_pretraining_tfrecords(files, 24, 5, repeat=True, seed=1).take(70)
    assert len(list(repeated)) == 70
    with pytest.raises(ValueError, match="No file matches"):
        read_pretraining_tfrecords(str(tmp_path / "missing-*.tfrecord"))
