import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import DynamicMasker, apply_dynamic_masking
from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances
from keras_bert_suite.tasks.pretrainer.data.tfrecords import (
    read_pretraining_tfrecords, write_pretraining_tfrecords)


@pytest.fixture(scope="module")
def sotu_shards(tmp_path_factory, sotu_documents, uncased_tokenizer):
    """Unmasked NSP instances of real text in 2 TFRecord shards."""
    instances = create_pretraining_instances(sotu_documents[:4], uncased_tokenizer,
                                             dupe_factor=2, static_masking=False, seed=0)
    directory = tmp_path_factory.mktemp("sotu_shards")
    files = [str(directory / f"part-{i}.tfrecord") for i in range(2)]
    write_pretraining_tfrecords(instances, files)
    return files, len(instances)


def _batches(files, masker, seed=7, batch_size=64):
    ds = read_pretraining_tfrecords(files, shuffle=False).batch(batch_size)
    return apply_dynamic_masking(ds, masker, seed=seed)


def _epoch(dataset):
    return [(x, y) for x, y in dataset.as_numpy_iterator()]


def _original(x, y):
    ids = x["token_ids"].copy()
    rows = np.arange(len(ids))[:, None].repeat(ids.shape[1] and y["mlm_labels"].shape[1], 1)
    valid = y["mlm_weights"] > 0
    ids[rows[valid], x["mask_positions"][valid]] = y["mlm_labels"][valid]
    return ids


@pytest.mark.real
@pytest.mark.needs_tf_graph
def test_dynamic_masking_statistics_on_real_text(sotu_shards, uncased_tokenizer):
    files, count = sotu_shards
    tok = uncased_tokenizer
    masker = DynamicMasker.from_tokenizer(tok)
    specials = [tok.cls_token_id, tok.sep_token_id, tok.pad_token_id]
    outcomes = np.zeros(3)
    chosen = eligible = seen = nsp = 0
    for x, y in _epoch(_batches(files, masker)):
        original = _original(x, y)
        valid = y["mlm_weights"] > 0
        seen += len(original)
        nsp += y["nsp_labels"].sum()
        for row in range(len(original)):
            positions = x["mask_positions"][row][valid[row]]
            assert (np.diff(positions) > 0).all()
            assert (positions < x["padding_mask"][row].sum()).all()  # never padding
            assert not np.isin(original[row][positions], specials).any()  # never specials
            n_real = x["padding_mask"][row].sum()
            assert len(positions) == min(20, max(1, round(n_real * 0.15)))
            new = x["token_ids"][row][positions]
            labels = y["mlm_labels"][row][valid[row]]
            outcomes += [(new == tok.mask_token_id).sum(),
                         ((new != tok.mask_token_id) & (new != labels)).sum(),
                         (new == labels).sum()]
            chosen += len(positions)
            eligible += (~np.isin(original[row][:n_real], specials)).sum()
            unmasked = np.setdiff1d(np.arange(len(original[row])), positions)
            np.testing.assert_array_equal(x["token_ids"][row][unmasked], original[row][unmasked])
    assert seen == count
    shares = outcomes / outcomes.sum()
    assert abs(chosen / eligible - 0.15) < 0.01, chosen / eligible
    np.testing.assert_allclose(shares, [0.8, 0.1, 0.1], atol=0.025)
    assert 0.4 < nsp / seen < 0.65


@pytest.mark.real
@pytest.mark.needs_tf_graph
def test_new_masks_every_epoch_and_seeded(sotu_shards, uncased_tokenizer):
    files, _ = sotu_shards
    masker = DynamicMasker.from_tokenizer(uncased_tokenizer)
    dataset = _batches(files, masker, seed=11)
    first, second = _epoch(dataset), _epoch(dataset)
    np.testing.assert_array_equal(first[0][0]["segment_ids"], second[0][0]["segment_ids"])
    same = np.mean([np.array_equal(a[0]["mask_positions"], b[0]["mask_positions"])
                    for a, b in zip(first, second)])
    assert same == 0.0
    again = _epoch(_batches(files, masker, seed=11))
    for a, b in zip(first, again):
        for part in (0, 1):
            for name in a[part]:
                np.testing.assert_array_equal(a[part][name], b[part][name])


@pytest.mark.real
@pytest.mark.needs_tf_graph
def test_dynamic_whole_word_masking(sotu_shards, uncased_tokenizer):
    files, _ = sotu_shards
    is_cont = ~uncased_tokenizer.word_start_flags()
    specials = {uncased_tokenizer.cls_token_id, uncased_tokenizer.sep_token_id}
    masker = DynamicMasker.from_tokenizer(uncased_tokenizer, whole_word_masking=True)
    multi = chosen = 0
    for x, y in _epoch(_batches(files, masker)):
        original = _original(x, y)
        for row in range(len(original)):
            positions = set(x["mask_positions"][row][y["mlm_weights"][row] > 0].tolist())
            chosen += len(positions)
            ids = original[row]
            for p in positions:
                start, end = p, p + 1
                while is_cont[ids[start]] and ids[start - 1] not in specials:
                    start -= 1
                while is_cont[ids[end]]:
                    end += 1
                assert set(range(start, end)) <= positions
                multi += end - start > 1
    assert multi > 30 and chosen > 0


def test_masking_pipeline_under_current_backend():
    """Tiny vocabulary, packed in the pipeline; the batches feed keras.ops on any backend."""
    masker = DynamicMasker(vocabulary_size=50, mask_token_id=4, cls_token_id=2, sep_token_id=3,
                           pad_token_id=0, max_predictions_per_seq=4)
    ids = np.zeros([6, 12], np.int32)
    ids[:, 0], ids[:, 1:9], ids[:, 9] = 2, np.arange(10, 18), 3
    features = {"token_ids": ids, "segment_ids": np.zeros_like(ids),
                "padding_mask": (ids > 0).astype(np.int32), "nsp_labels": np.zeros(6, np.int32)}
    ds = apply_dynamic_masking(tf.data.Dataset.from_tensor_slices(features), masker, seed=1)
    batches = list(ds.batch(3))
    assert len(batches) == 2
    for x, y in batches:
        positions = keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(x["mask_positions"]))
        weights = keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(y["mlm_weights"]))
        assert positions.shape == (3, 4) and weights.shape == (3, 4)
        # 10 real tokens -> round(1.5) = 2 predictions, never [CLS]/[SEP]/padding.
        np.testing.assert_array_equal(weights.sum(axis=1), [2, 2, 2])
        assert ((positions[weights > 0] >= 1) & (positions[weights > 0] <= 8)).all()
        assert y["nsp_labels"].shape == (3,)
