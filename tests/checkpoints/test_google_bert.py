"""Original Google BERT checkpoints, written with tf.compat.v1 exactly as google-research/bert
names its variables, read back and run against transformers."""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.checkpoints import CheckpointMismatchError, load_checkpoint
from keras_bert_suite.text import wordpiece_files
from tests.checkpoints.checkpoint_writers import (
    TINY_HF_CONFIG, bert_config_json, google_head_variables, google_variables,
    tiny_hf_tensors, write_google_dir)
from tests.minilm_reference import assert_matches_reference, reference



@pytest.fixture(scope="module")
def minilm_google_dir(tmp_path_factory, minilm_dir, minilm_tensors):
    """MiniLM as a pretraining checkpoint: encoder + cls heads + an optimizer slot + global_step."""
    with open(os.path.join(minilm_dir, "config.json")) as f:
        hf_config = json.load(f)
    variables = google_variables(minilm_tensors, hf_config["num_hidden_layers"])
    variables.update(google_head_variables(384, 30522))
    variables["bert/pooler/dense/kernel/adam_m"] = np.zeros((384, 384), "float32")
    variables["global_step"] = np.int64(1000)
    directory = tmp_path_factory.mktemp("google") / "uncased_L-6_H-384_A-12"
    return write_google_dir(directory, bert_config_json(hf_config), variables,
                            os.path.join(minilm_dir, "vocab.txt"))


@pytest.mark.real
def test_google_checkpoint_gives_the_same_weights_and_numbers(
        minilm_google_dir, minilm_checkpoint, minilm_dir):
    checkpoint = load_checkpoint(minilm_google_dir)

    assert checkpoint.format == "google_bert"
    assert wordpiece_files.lowercase(checkpoint.directory) is True
    assert checkpoint.config == minilm_checkpoint.config
    for name, value in minilm_checkpoint.weights.items():
        np.testing.assert_array_equal(checkpoint.weights[name], value, err_msg=name)
    heads = google_head_variables(384, 30522)
    np.testing.assert_array_equal(
        checkpoint.weights["nsp/kernel"], heads["cls/seq_relationship/output_weights"].T)
    np.testing.assert_array_equal(
        checkpoint.weights["mlm/output_bias"], heads["cls/predictions/output_bias"])
    np.testing.assert_array_equal(
        checkpoint.weights["mlm/layer_norm/gamma"],
        heads["cls/predictions/transform/LayerNorm/gamma"])

    expected = reference(minilm_dir)
    encoder = BertEncoder.from_preset(minilm_google_dir)
    assert_matches_reference(encoder(expected["inputs"]), expected)


@pytest.mark.real
def test_checkpoint_prefix_is_accepted(minilm_google_dir, minilm_checkpoint):
    checkpoint = load_checkpoint(os.path.join(minilm_google_dir, "bert_model.ckpt"))
    np.testing.assert_array_equal(
        checkpoint.weights["layer_5/output/kernel"],
        minilm_checkpoint.weights["layer_5/output/kernel"])


def test_fewer_layers_than_config_names_the_first_missing_variable(tmp_path):
    variables = google_variables(tiny_hf_tensors(), num_layers=2)
    config = {**bert_config_json(TINY_HF_CONFIG), "num_hidden_layers": 3}
    directory = write_google_dir(tmp_path / "uncased_tiny", config, variables)

    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(directory)

    message = str(error.value)
    assert "no variable 'bert/encoder/layer_2/attention/self/query/kernel'" in message
    assert "expected shape (8, 8)" in message and "bert_config.json" in message


@pytest.mark.parametrize("directory_name, tokens, lowercase", [
    ("cased_L-12_H-768_A-12", ["[CLS]", "the"], False),
    ("uncased_L-12_H-768_A-12", ["[CLS]", "the"], True),
    ("my_bert", ["[CLS]", "[SEP]", "Hello", "the"], False),
    ("my_bert", ["[CLS]", "[SEP]", "hello", "##ing"], True),
])
def test_casing_from_directory_name_or_vocabulary(tmp_path, directory_name, tokens, lowercase):
    directory = tmp_path / directory_name
    directory.mkdir()
    (directory / "bert_config.json").write_text(json.dumps(bert_config_json(TINY_HF_CONFIG)))
    (directory / "vocab.txt").write_text("\n".join(tokens) + "\n")

    checkpoint = load_checkpoint(directory, load_weights=False)

    assert checkpoint.format == "google_bert"
    assert wordpiece_files.lowercase(checkpoint.directory) is lowercase


def test_more_layers_than_config_names_the_first_extra_variable(tmp_path):
    variables = google_variables(tiny_hf_tensors(), num_layers=2)
    config = {**bert_config_json(TINY_HF_CONFIG), "num_hidden_layers": 1}
    directory = write_google_dir(tmp_path / "uncased_tiny", config, variables)

    with pytest.raises(CheckpointMismatchError, match=r"variable 'bert/encoder/layer_1/.*' of "
                                                      r"transformer layer 1, but .*bert_config"
                                                      r".json says there are 1 layers"):
        load_checkpoint(directory)
