"""save_google_bert / `kbs convert --to google`: the original BERT checkpoint layout, read back
exactly by our reader and, independently, by name with TensorFlow's checkpoint reader against
the variable names google-research/bert's modeling.py gives (real MiniLM, every backend)."""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import BertClassifier, BertEncoder, BertPretrainer, save_google_bert
from keras_bert_suite.cli import main as kbs
from tests.checkpoints.checkpoint_writers import (
    bert_config_json, google_variables, model_garden_encoder, run_model_garden_encoder)
from tests.conftest import to_numpy
from tests.minilm_reference import assert_matches_reference, reference
from tests.numerics import assert_close

pytestmark = pytest.mark.real
PRESET = "minilm_l6_h384_uncased"


def _weights(model):
    return {name: to_numpy(variable) for name, variable in model.weight_map().items()}


def _checkpoint_variables(directory):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(directory, "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_encoder_has_modeling_py_names_and_comes_back_exactly(tmp_path, minilm_dir):
    transformers = pytest.importorskip("transformers")
    encoder = BertEncoder.from_preset(PRESET)
    path = save_google_bert(encoder, tmp_path / "google")
    # The names and values the test writer derives from transformers' own state dict.
    state = {name: tensor.numpy() for name, tensor in
             transformers.BertModel.from_pretrained(minilm_dir).state_dict().items()}
    expected = google_variables(state, num_layers=6)
    written = _checkpoint_variables(path)
    assert sorted(written) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    with open(os.path.join(path, "bert_config.json")) as f:
        assert json.load(f) == bert_config_json(transformers.BertConfig.from_pretrained(
            minilm_dir).to_dict())

    back = BertEncoder.from_preset(path)
    came_back = _weights(back)  # once: each call copies every weight
    for name, value in _weights(encoder).items():
        np.testing.assert_array_equal(came_back[name], value, err_msg=name)
    expected_outputs = reference(minilm_dir)
    assert_matches_reference(back(expected_outputs["inputs"]), expected_outputs)


def test_pretrainer_heads_are_the_cls_variables(tmp_path):
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(3)
    # The heads' names are a property of code: a random 2-layer BERT proves them.
    pretrainer = BertPretrainer.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    path = save_google_bert(pretrainer, tmp_path / "google")
    written = _checkpoint_variables(path)
    heads = _weights(pretrainer)
    np.testing.assert_array_equal(written["cls/seq_relationship/output_weights"],
                                  heads["nsp/kernel"].T)  # [2, H]: modeling.py's transpose_b
    np.testing.assert_array_equal(written["cls/predictions/output_bias"],
                                  heads["mlm/output_bias"])
    assert not any("decoder" in name for name in written)  # tied to the word embeddings
    back = BertPretrainer.from_preset(path)
    for name, value in _weights(back).items():
        np.testing.assert_array_equal(value, heads[name], err_msg=name)


def test_kbs_convert_to_google_and_clear_errors(tmp_path, minilm_dir, capsys):
    kbs(["convert", minilm_dir, str(tmp_path / "google"), "--to", "google"])
    assert "Google BERT" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "google")) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "vocab.txt"]
    with open(os.path.join(minilm_dir, "vocab.txt"), encoding="utf-8") as f:
        assert open(tmp_path / "google" / "vocab.txt", encoding="utf-8").read() == f.read()

    classifier = BertClassifier.from_preset(PRESET, num_classes=2, load_weights=False)
    with pytest.raises(ValueError, match="has no task heads .pass model.encoder"):
        save_google_bert(classifier, tmp_path / "task")
    other_epsilon = BertEncoder.from_preset(PRESET, load_weights=False, layer_norm_epsilon=1e-6)
    with pytest.raises(ValueError, match="hard-wires 1e-12"):
        save_google_bert(other_epsilon, tmp_path / "epsilon")


@pytest.mark.needs_tf_graph(reason="runs Model Garden's own converter and tf_keras encoder, "
                            "whose numbers do not depend on the Keras backend")
def test_model_garden_converter_reads_it_and_computes_our_numbers(minilm_garden_dir, minilm_dir):
    """Model Garden's tf2_bert_encoder_checkpoint_converter turns our export into its TF2
    BertEncoder checkpoint; that encoder, restored, gives transformers' (and our) outputs."""
    tf = pytest.importorskip("tensorflow")
    pytest.importorskip("official.nlp.tools.tf2_bert_encoder_checkpoint_converter")
    from official.legacy.bert import configs

    path = minilm_garden_dir  # our MiniLM export, through Model Garden's converter
    bert_config = configs.BertConfig.from_json_file(os.path.join(path, "bert_config.json"))
    # Model Garden's "gelu" is the tanh approximation (see model_garden_encoder); with the
    # exact GELU that BERT and we compute, only the weights can differ.
    expected = reference(minilm_dir)
    inputs = expected["inputs"]
    for exact_gelu in (False, True):
        garden = model_garden_encoder(bert_config, exact_gelu)
        tf.train.Checkpoint(encoder=garden).read(
            os.path.join(path, "bert_model.ckpt")).assert_existing_objects_matched()
        outputs = run_model_garden_encoder(garden, inputs)
        if exact_gelu:
            assert_matches_reference(outputs, expected)
        else:
            real = inputs["padding_mask"].astype(bool)
            assert_close(outputs["sequence_output"][real], expected["sequence_output"][real],
                         rtol=1e-2, atol=1e-2)
