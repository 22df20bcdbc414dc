"""TF Model Garden TF2 (object-based) BERT checkpoints, written by Model Garden's own
tf2_bert_encoder_checkpoint_converter: read back exactly on every backend (a random 2-layer
BERT, a tiny pretrainer), real MiniLM computing what Model Garden's own encoder computes, and
broken ones refused by name."""

import json
import os
import shutil

import numpy as np
import pytest

from keras_bert_suite import BertEncoder, BertPretrainer
from keras_bert_suite.checkpoints import CheckpointMismatchError, load_checkpoint
from keras_bert_suite.cli import main as kbs
from keras_bert_suite.text import wordpiece_files
from tests.checkpoints.checkpoint_writers import (
    OBJECT_SUFFIX, model_garden_encoder, object_checkpoint_variables, run_model_garden_encoder,
    write_model_garden_dir, write_object_checkpoint)
from tests.conftest import to_numpy
from tests.minilm_reference import assert_matches_reference, reference

pytestmark = pytest.mark.real
PRESET = "minilm_l6_h384_uncased"
SMALL = "bert_uncased_L-2_H-128_A-2"  # its architecture, random weights
TINY = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=16)


def _weights(model):
    return {name: to_numpy(variable) for name, variable in model.weight_map().items()}


@pytest.fixture(scope="module")
def small_encoder():
    """A random 2-layer, 128-wide BERT with the uncased vocabulary: which weight goes where
    in a released directory is the subject, not MiniLM's values (Model Garden's converter
    rebuilds MiniLM in ~14 s, this one in ~2)."""
    return BertEncoder.from_preset(SMALL, load_weights=False)


@pytest.fixture(scope="module")
def original(small_encoder):
    return _weights(small_encoder)


@pytest.fixture(scope="module")
def garden_dir(tmp_path_factory, small_encoder, minilm_dir):
    """The small BERT as a v3 release: bert_config.json, bert_model.ckpt.{index,data-*},
    vocab.txt."""
    directory = tmp_path_factory.mktemp("garden") / "uncased_L-2_H-128_A-2"
    return write_model_garden_dir(directory, small_encoder, os.path.join(minilm_dir, "vocab.txt"))


@pytest.fixture(scope="module")
def tiny_garden_dir(tmp_path_factory):
    """A random 2-layer encoder through the same converter (for the error cases)."""
    return write_model_garden_dir(tmp_path_factory.mktemp("tiny_garden"), BertEncoder(**TINY))


def test_released_layout_gives_the_same_weights(garden_dir, original, small_encoder):
    checkpoint = load_checkpoint(garden_dir)

    assert checkpoint.format == "model_garden"
    config = small_encoder.get_config()
    assert checkpoint.config == {key: config[key] for key in checkpoint.config}
    assert (checkpoint.config["num_layers"], checkpoint.config["hidden_dim"]) == (2, 128)
    assert wordpiece_files.vocabulary_file(checkpoint.directory) == os.path.join(
        garden_dir, "vocab.txt")
    assert wordpiece_files.lowercase(checkpoint.directory) is True
    assert sorted(checkpoint.weights) == sorted(original)  # no head in an encoder checkpoint
    encoder = BertEncoder.from_preset(garden_dir)
    for name, value in _weights(encoder).items():
        np.testing.assert_array_equal(value, original[name], err_msg=name)


def test_checkpoint_prefix_and_kbs_convert(garden_dir, original, tmp_path, capsys):
    checkpoint = load_checkpoint(os.path.join(garden_dir, "bert_model.ckpt"))
    assert checkpoint.format == "model_garden"
    np.testing.assert_array_equal(checkpoint.weights["layer_1/attention/qkv/kernel"],
                                  original["layer_1/attention/qkv/kernel"])

    kbs(["convert", garden_dir, str(tmp_path / "ours")])
    assert "Converted model_garden checkpoint" in capsys.readouterr().out
    converted = load_checkpoint(tmp_path / "ours")
    assert converted.format == "ours"
    for name, value in original.items():
        np.testing.assert_array_equal(converted.weights[name], value, err_msg=name)


def test_pretrainer_checkpoint_gives_the_masked_lm_head(tmp_path):
    # Which weight goes where is the subject: a tiny random pretrainer has every head weight
    # (Model Garden's converter rebuilds MiniLM's pretrainer in 14 s, this one in about 2).
    pretrainer = BertPretrainer(BertEncoder(**TINY))
    directory = write_model_garden_dir(tmp_path / "pretrainer", pretrainer, pretrainer=True,
                                       released_layout=False)  # model-1.* + `checkpoint`
    variables = object_checkpoint_variables(os.path.join(directory, "model-1"))
    # The word embeddings, shared with the head, are saved once: under the head's name.
    assert "masked_lm/embedding_table" + OBJECT_SUFFIX in variables
    assert "encoder/layer_with_weights-0/embeddings" + OBJECT_SUFFIX not in variables

    checkpoint = load_checkpoint(directory)
    assert checkpoint.format == "model_garden"
    assert not any(name.startswith("nsp/") for name in checkpoint.weights)  # not read
    back = BertPretrainer.from_preset(directory, next_sentence_prediction=False)
    expected = _weights(pretrainer)
    for name, value in _weights(back).items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


@pytest.mark.needs_tf_graph(reason="runs Model Garden's own tf_keras encoder, whose numbers "
                            "do not depend on the Keras backend")
def test_computes_what_model_gardens_encoder_computes(minilm_garden_dir, minilm_dir):
    import tensorflow as tf
    from official.legacy.bert import configs

    bert_config = configs.BertConfig.from_json_file(
        os.path.join(minilm_garden_dir, "bert_config.json"))
    garden = model_garden_encoder(bert_config, exact_gelu=True)
    # assert_consumed: the checkpoint holds that encoder's variables and nothing else.
    tf.train.Checkpoint(encoder=garden).restore(
        os.path.join(minilm_garden_dir, "bert_model.ckpt")).assert_consumed()
    inputs = reference(minilm_dir)["inputs"]
    expected = {"inputs": inputs, **run_model_garden_encoder(garden, inputs)}

    outputs = BertEncoder.from_preset(minilm_garden_dir)(inputs)

    # Two implementations in float32: the parity tolerance, as against transformers.
    assert_matches_reference(outputs, expected)


def _rewrite(source_dir, directory, change=None, bert_config=None):
    """A copy of `source_dir` whose checkpoint variables went through `change(variables)` and
    whose bert_config.json got the `bert_config` entries."""
    os.makedirs(directory)
    shutil.copy(os.path.join(source_dir, "bert_config.json"), directory)
    variables = object_checkpoint_variables(os.path.join(source_dir, "bert_model.ckpt"))
    if change:
        change(variables)
    write_object_checkpoint(os.path.join(directory, "bert_model.ckpt"), variables)
    if bert_config:
        path = os.path.join(directory, "bert_config.json")
        with open(path) as f:
            config = json.load(f)
        with open(path, "w") as f:
            json.dump({**config, **bert_config}, f)
    return str(directory)


def test_rewritten_checkpoint_reads_the_same(tiny_garden_dir, tmp_path):
    """The writer the error cases use keeps every key, so their errors are the reader's."""
    directory = _rewrite(tiny_garden_dir, tmp_path / "same")
    assert sorted(object_checkpoint_variables(os.path.join(directory, "bert_model.ckpt"))) == (
        sorted(object_checkpoint_variables(os.path.join(tiny_garden_dir, "bert_model.ckpt"))))
    expected = load_checkpoint(tiny_garden_dir).weights
    for name, value in load_checkpoint(directory).weights.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_missing_variable_is_named(tiny_garden_dir, tmp_path):
    key = "encoder/layer_with_weights-5/_intermediate_dense/kernel" + OBJECT_SUFFIX
    directory = _rewrite(tiny_garden_dir, tmp_path / "missing",
                         change=lambda variables: variables.pop(key))

    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(directory)

    message = str(error.value)
    assert f"no variable '{key}'" in message
    assert "expected shape (8, 16)" in message and "bert_config.json" in message


def test_mis_shaped_variable_is_named_with_both_shapes(tiny_garden_dir, tmp_path):
    key = "encoder/layer_with_weights-4/_attention_layer/_output_dense/kernel" + OBJECT_SUFFIX

    def shrink(variables):
        variables[key] = variables[key][..., :4]  # [N, Dh, H] = (2, 4, 8) -> (2, 4, 4)

    directory = _rewrite(tiny_garden_dir, tmp_path / "shape", change=shrink)
    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(directory)

    message = str(error.value)
    assert f"'{key}'" in message
    assert "has shape (2, 4, 4)" in message and "implies (2, 4, 8)" in message


def test_more_layers_than_the_config_says_is_refused(tiny_garden_dir, tmp_path):
    directory = _rewrite(tiny_garden_dir, tmp_path / "layers", bert_config={
        "num_hidden_layers": 1})

    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(directory)

    message = str(error.value)
    assert "'encoder/layer_with_weights-5/_attention_layer/" in message  # the checkpoint's 2nd
    assert "num_hidden_layers=1" in message and "the checkpoint has 2" in message


def test_without_bert_config_says_it_is_needed(tiny_garden_dir, tmp_path):
    directory = _rewrite(tiny_garden_dir, tmp_path / "no_config")
    os.remove(os.path.join(directory, "bert_config.json"))

    with pytest.raises(CheckpointMismatchError, match="has no bert_config.json: the checkpoint "
                       "holds weights only"):
        load_checkpoint(directory)
