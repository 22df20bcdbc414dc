"""Packed rows in the encoder and the pretrainer: several instances in one row, told apart by
the padding mask's instance numbers, compute what each computes alone (every backend)."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder, BertPretrainer
from keras_bert_suite.layers import packed_rows
from keras_bert_suite.training.losses import sparse_cross_entropy_from_logits
from tests.conftest import to_numpy
from tests.numerics import assert_close

TINY = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=16, dropout=0.0)


def test_packed_row_helpers_give_the_documented_numbers():
    mask = np.array([[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0], [0, 1, 1, 0, 1, 0]], "int32")
    np.testing.assert_array_equal(to_numpy(packed_rows.positions(mask)),
                                  [[0, 1, 2, 0, 1, 5], [0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]])
    np.testing.assert_array_equal(to_numpy(packed_rows.tokens_before_in_instance(mask)),
                                  [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 0, 1], [0, 0, 1, 1, 2, 2]])
    np.testing.assert_array_equal(to_numpy(packed_rows.instance_starts(mask, 3)),
                                  [[0, 3, 0], [0, 0, 0], [1, 0, 0]])
    attention = to_numpy(packed_rows.attention_mask(mask[:1]))[0, 0].astype(int)
    np.testing.assert_array_equal(attention, [[1, 1, 1, 0, 0, 0]] * 3 + [[0, 0, 0, 1, 1, 0]] * 2
                                  + [[1, 1, 1, 1, 1, 0]])


def _inputs(mask, seed=0):
    rng = np.random.default_rng(seed)
    return {"token_ids": rng.integers(1, 50, mask.shape).astype("int32"),
            "segment_ids": (rng.random(mask.shape) < 0.5).astype("int32"),
            "padding_mask": mask.astype("int32")}


@pytest.mark.parametrize("position_offset", [0, 2])
def test_zero_one_masks_compute_exactly_what_an_unpacked_encoder_did(position_offset):
    """The old formulation, written out: a [B, 1, 1, T] key mask and positions 0..T-1 (BERT)
    or counted over the real tokens (RoBERTa). Bit for bit the same, padding rows included."""
    encoder = BertEncoder(**TINY, position_offset=position_offset)
    mask = np.ones((3, 7), "int32")
    mask[1, 4:] = 0
    mask[2, :2] = 0  # left padding: positions still count from the row start
    inputs = _inputs(mask)
    embeddings = encoder.embeddings
    x = embeddings.token_embedding(inputs["token_ids"]) + embeddings.segment_embedding(
        inputs["segment_ids"])
    if position_offset:
        positions = np.cumsum(mask, axis=1) * mask + position_offset - 1
    else:
        positions = np.arange(7)[None].repeat(3, 0)
    x = embeddings.layer_norm(x + keras.ops.take(embeddings.position_embedding, positions,
                                                 axis=0))
    key_mask = keras.ops.cast(mask, "bool")[:, None, None, :]
    for block in encoder.transformer_layers:
        x = block(x, key_mask)
    np.testing.assert_array_equal(to_numpy(encoder(inputs)["sequence_output"]), to_numpy(x))


@pytest.mark.parametrize("position_offset", [0, 2])
def test_a_packed_row_computes_each_instance_as_alone(position_offset):
    encoder = BertEncoder(**TINY, position_offset=position_offset)
    lengths = (5, 3, 4)
    packed = np.array([[1] * 5 + [2] * 3 + [3] * 4 + [0] * 2], "int32")  # [1, 14]
    inputs = _inputs(packed, seed=1)
    output = to_numpy(encoder(inputs)["sequence_output"])[0]
    start = 0
    for length in lengths:
        alone = {name: value[:, start:start + length] for name, value in inputs.items()}
        alone["padding_mask"] = np.ones_like(alone["padding_mask"])
        assert_close(output[start:start + length],
                     to_numpy(encoder(alone)["sequence_output"])[0])
        start += length
    # The last layer at a few rows only (the pretrainer's path) reads the same rows.
    rows = np.array([[0, 5, 8, 9, 13]], "int32")
    gathered = to_numpy(encoder.encode_at(inputs, rows)["gathered_output"])
    assert_close(gathered[0], output[rows[0]])


# === The pretrainer: losses per instance equal the unpacked ones, on real text ===

SEQUENCE_LENGTH, PREDICTIONS, ROW_LENGTH, MAX_INSTANCES = 32, 5, 64, 3


@pytest.fixture(scope="module")
def sotu_instances(sotu_files):
    """Statically masked instances of two State of the Union addresses (short targets, so
    they vary in length)."""
    from keras_bert_suite.tasks.pretrainer.data.documents import read_documents
    from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances
    from keras_bert_suite.text import BertTokenizer

    documents = read_documents(sotu_files[100:102], layout="paragraph_per_line")
    instances = create_pretraining_instances(
        documents, BertTokenizer.from_preset("minilm_l6_h384_uncased"), SEQUENCE_LENGTH,
        dupe_factor=1, short_seq_prob=0.7, max_predictions_per_seq=PREDICTIONS, seed=3)
    return instances[:10]


def _pack(features):
    """The same instances packed by the data pipeline's packer (tf.data, on every backend),
    and where each instance went: (row, slot) per instance."""
    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data.packing import first_fit_rows, pack_instances

    dataset = pack_instances(tf.data.Dataset.from_tensor_slices(features), ROW_LENGTH,
                             MAX_INSTANCES, max_predictions_per_row=3 * PREDICTIONS)
    rows = list(dataset.as_numpy_iterator())
    packed = {name: np.stack([row[name] for row in rows]) for name in rows[0]}
    lengths = features["padding_mask"].sum(1)
    placed = first_fit_rows(lengths, (features["mlm_weights"] > 0).sum(1), ROW_LENGTH,
                            MAX_INSTANCES, 3 * PREDICTIONS).numpy()
    slots = [int((placed[:index] == row).sum()) for index, row in enumerate(placed)]
    return packed, list(zip(placed, slots))


def _x_y(features):
    x = {name: features[name] for name in
         ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    y = {name: features[name] for name in
         ("mlm_labels", "mlm_weights", "nsp_labels", "nsp_weights") if name in features}
    return x, y


def _loss(model, x, y):
    """The compiled losses' total on (x, y), as fit computes it (the labels re-keyed)."""
    labels, weights = model.labels_by_output(dict(y), None)
    outputs = model(x)
    losses = model.default_loss()
    return sum(to_numpy(losses[name](labels[name], outputs[name], weights.get(name)))
               for name in losses), outputs


def test_packed_losses_equal_the_unpacked_ones(sotu_instances):
    from keras_bert_suite.tasks.pretrainer.data.packing import instance_features

    unpacked = instance_features(sotu_instances, SEQUENCE_LENGTH, PREDICTIONS)
    packed, placement = _pack(unpacked)
    assert len(packed["token_ids"]) < len(sotu_instances)  # it packed something
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**{**TINY, "vocabulary_size": 30522,
                             "max_sequence_length": ROW_LENGTH})
    one_per_row = BertPretrainer(encoder)
    several = BertPretrainer(BertEncoder.from_config(encoder.get_config()),
                             max_instances_per_row=MAX_INSTANCES)
    several.set_weights(one_per_row.get_weights())

    loss, outputs = _loss(one_per_row, *_x_y(unpacked))
    packed_loss, packed_outputs = _loss(several, *_x_y(packed))
    assert_close(packed_loss, loss)

    cross_entropy = to_numpy(sparse_cross_entropy_from_logits(
        unpacked["mlm_labels"], outputs["mlm_logits"]))  # [N, P]
    packed_cross_entropy = to_numpy(sparse_cross_entropy_from_logits(
        packed["mlm_labels"], packed_outputs["mlm_logits"]))  # [R, P_row]
    nsp_logits, packed_nsp = to_numpy(outputs["nsp_logits"]), to_numpy(
        packed_outputs["nsp_logits"])
    used = {}
    for index, (row, slot) in enumerate(placement):
        count = int(unpacked["mlm_weights"][index].sum())
        first = used.get(row, 0)
        used[row] = first + count
        assert_close(packed_cross_entropy[row, first:first + count],
                     cross_entropy[index, :count])
        assert_close(packed_nsp[row, slot], nsp_logits[index])
        assert packed["nsp_weights"][row, slot] == 1.0


def test_packed_pretrainer_settings_are_checked():
    with pytest.raises(ValueError, match="max_instances_per_row must be None"):
        BertPretrainer(BertEncoder(**TINY), max_instances_per_row=0)
