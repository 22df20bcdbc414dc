"""Our preset directory: save_preset -> from_preset round trip, atomic replace, refusals."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.checkpoints import (
    CheckpointMismatchError, UnsupportedCheckpointError, load_checkpoint, preset_dir)
from keras_bert_suite.text import wordpiece_files
from tests.minilm_reference import reference


def _tiny_encoder():
    return BertEncoder(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
                       intermediate_dim=16, max_sequence_length=12)


@pytest.mark.real
def test_minilm_round_trip_gives_identical_outputs(tmp_path, minilm_dir):
    encoder = BertEncoder.from_preset(minilm_dir)
    directory = tmp_path / "minilm"
    encoder.save_preset(directory, vocabulary=os.path.join(minilm_dir, "vocab.txt"))

    assert sorted(os.listdir(directory)) == [
        "config.json", "model.weights.npz", "tokenizer.json", "vocab.txt"]
    assert sorted(os.listdir(tmp_path)) == ["minilm"]  # no staging directory left behind
    checkpoint = load_checkpoint(directory, load_weights=False)
    assert checkpoint.format == "ours"
    assert wordpiece_files.lowercase(checkpoint.directory) is True
    assert checkpoint.config["num_layers"] == 6

    restored = BertEncoder.from_preset(directory)
    inputs = reference(minilm_dir)["inputs"]
    before, after = encoder(inputs), restored(inputs)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(after[name]), keras.ops.convert_to_numpy(before[name]))


def test_save_replaces_an_existing_preset_and_keeps_casing_and_vocabulary(tmp_path):
    directory = tmp_path / "preset"
    _tiny_encoder().save_preset(directory, vocabulary=["[PAD]", "a"], lowercase=True)
    second = _tiny_encoder()
    second.save_preset(directory, vocabulary=["[PAD]", "B"], lowercase=False)

    checkpoint = load_checkpoint(directory)
    assert wordpiece_files.lowercase(checkpoint.directory) is False
    vocabulary_file = wordpiece_files.vocabulary_file(checkpoint.directory)
    assert open(vocabulary_file).read().split() == ["[PAD]", "B"]
    np.testing.assert_array_equal(
        checkpoint.weights["pooler/kernel"], keras.ops.convert_to_numpy(second.pooler.kernel))
    assert sorted(os.listdir(tmp_path)) == ["preset"]


def test_save_refuses_to_replace_a_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a keras_bert_suite preset"):
        _tiny_encoder().save_preset(tmp_path)
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_newer_format_version_is_refused(tmp_path):
    preset_dir.save(tmp_path / "p", {"num_layers": 1}, {})
    config_path = tmp_path / "p" / "config.json"
    saved = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**saved, "format_version": 99}))
    with pytest.raises(UnsupportedCheckpointError, match="format_version 99"):
        load_checkpoint(tmp_path / "p")


def test_a_format_version_1_preset_loads_its_qkv_weights_reshaped(tmp_path):
    """Version 1 stored the qkv kernel [H, 3H] and bias [3H] (the same numbers in the same
    order): such a preset still loads and gives the same outputs."""
    encoder = _tiny_encoder()
    weights = {name: keras.ops.convert_to_numpy(v) for name, v in encoder.weight_map().items()}
    kernel, bias = "layer_0/attention/qkv/kernel", "layer_0/attention/qkv/bias"
    weights[kernel], weights[bias] = weights[kernel].reshape(8, 24), weights[bias].reshape(24)
    preset_dir.save(tmp_path / "p", encoder.get_config(), weights)
    config_path = tmp_path / "p" / "config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()),
                                       "format_version": 1}))

    restored = BertEncoder.from_preset(tmp_path / "p")
    inputs = {"token_ids": np.array([[2, 7, 3, 0]], "int32"),
              "segment_ids": np.zeros((1, 4), "int32"),
              "padding_mask": np.array([[1, 1, 1, 0]], "int32")}
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(restored(inputs)["sequence_output"]),
                                  keras.ops.convert_to_numpy(encoder(inputs)["sequence_output"]))


def test_mis_shaped_weight_names_the_weight_and_both_shapes(tmp_path):
    encoder = _tiny_encoder()
    weights = {name: keras.ops.convert_to_numpy(v) for name, v in encoder.weight_map().items()}
    weights["layer_0/intermediate/kernel"] = np.zeros((8, 15), "float32")
    preset_dir.save(tmp_path / "p", encoder.get_config(), weights)

    with pytest.raises(CheckpointMismatchError) as error:
        BertEncoder.from_preset(tmp_path / "p")

    message = str(error.value)
    assert "'layer_0/intermediate/kernel'" in message
    assert "(8, 15)" in message and "(8, 16)" in message
