"""KerasHub: converters between BertBackbone's weights and ours (both directions, checked by
running both models), and presets written by keras_hub's own save_to_preset."""

import json
import os

import h5py
import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.checkpoints import UnsupportedCheckpointError, load_checkpoint
from keras_bert_suite.checkpoints.keras_hub_backbones import BACKBONES
from keras_bert_suite.checkpoints.keras_hub_h5 import read_weights_h5
from keras_bert_suite.checkpoints.keras_hub_weights import from_keras_hub, to_keras_hub
from keras_bert_suite.text import wordpiece_files
from tests.minilm_reference import PARITY_ATOL, PARITY_RTOL, reference
from tests.numerics import assert_close

keras_hub_package = pytest.importorskip("keras_hub")

# KerasHub's TransformerEncoder uses the tanh-approximate GELU; ours (and BERT's) is exact.
# With the same weights that alone moves MiniLM's outputs by ~4e-3 (measured, on values that
# reach |5.6|); a wrong weight would move them by O(1).
APPROXIMATE_GELU_TOLERANCE = 1e-2
BERT = BACKBONES["BertBackbone"]


@pytest.fixture(scope="module")
def minilm_encoder(minilm_dir):
    return BertEncoder.from_preset(minilm_dir)


@pytest.fixture(scope="module")
def minilm_backbone(minilm_encoder):
    """KerasHub's BertBackbone holding our MiniLM weights, converted by `to_keras_hub`."""
    ours = {name: keras.ops.convert_to_numpy(v) for name, v in minilm_encoder.weight_map().items()}
    return _backbone_like(minilm_encoder, to_keras_hub(BERT, ours, _config(minilm_encoder)))


def _backbone_like(encoder, weights):
    """A KerasHub BertBackbone with our encoder's architecture and `weights` (KerasHub names)."""
    hard_wired = ("layer_norm_epsilon", "initializer_range")  # BertBackbone has no such args
    config = {key: value for key, value in _config(encoder).items() if key not in hard_wired}
    backbone = keras_hub_package.models.BertBackbone(**config)
    assert sorted(w.path for w in backbone.weights) == sorted(weights)
    for variable in backbone.weights:
        variable.assign(weights[variable.path])
    return backbone


def _numpy(outputs):
    return {name: keras.ops.convert_to_numpy(value) for name, value in outputs.items()}


def _assert_outputs_close(actual, expected, padding_mask, **tolerance):
    """sequence_output over real tokens and pooled_output, within assert_close's tolerance."""
    real = padding_mask.astype(bool)
    assert_close(actual["sequence_output"][real], expected["sequence_output"][real],
                 err_msg="sequence_output", **tolerance)
    assert_close(actual["pooled_output"], expected["pooled_output"], err_msg="pooled_output",
                 **tolerance)


@pytest.mark.real
def test_our_weights_run_in_keras_hub(minilm_encoder, minilm_backbone, minilm_dir):
    inputs = reference(minilm_dir)["inputs"]
    expected = _numpy(minilm_encoder(inputs))

    mask = inputs["padding_mask"]
    _assert_outputs_close(_numpy(minilm_backbone(inputs)), expected, mask,
                          rtol=APPROXIMATE_GELU_TOLERANCE, atol=APPROXIMATE_GELU_TOLERANCE)
    dense_layers = [layer._feedforward_intermediate_dense
                    for layer in minilm_backbone.transformer_layers]
    approximate = dense_layers[0].activation
    try:  # swap in the exact GELU: now only the weights can differ
        for dense in dense_layers:
            dense.activation = keras.activations.gelu
        exact = _numpy(minilm_backbone(inputs))
    finally:
        for dense in dense_layers:
            dense.activation = approximate
    _assert_outputs_close(exact, expected, mask, rtol=PARITY_RTOL, atol=PARITY_ATOL)


@pytest.mark.real
def test_keras_hub_weights_run_in_ours(minilm_encoder, minilm_backbone, minilm_dir):
    ours = {name: keras.ops.convert_to_numpy(v) for name, v in minilm_encoder.weight_map().items()}
    config = _config(minilm_encoder)

    converted = from_keras_hub(
        BERT, {w.path: keras.ops.convert_to_numpy(w) for w in minilm_backbone.weights}, config)

    assert sorted(converted) == sorted(ours)
    for name, value in ours.items():
        np.testing.assert_array_equal(converted[name], value, err_msg=name)
    encoder = BertEncoder(**config)
    encoder.load_weight_map(converted)
    inputs = reference(minilm_dir)["inputs"]
    _assert_outputs_close(_numpy(encoder(inputs)), _numpy(minilm_encoder(inputs)),
                          inputs["padding_mask"])


@pytest.mark.real
def test_preset_saved_by_keras_hub_loads(tmp_path, minilm_encoder, minilm_backbone, minilm_dir):
    minilm_backbone.save_to_preset(str(tmp_path))
    tokenizer = keras_hub_package.models.BertTokenizer(
        vocabulary=os.path.join(minilm_dir, "vocab.txt"), lowercase=True)
    tokenizer.save_to_preset(str(tmp_path))

    checkpoint = load_checkpoint(tmp_path, load_weights=False)
    assert checkpoint.format == "keras_hub"
    assert wordpiece_files.lowercase(checkpoint.directory) is True
    vocabulary = open(wordpiece_files.vocabulary_file(checkpoint.directory)).read().split()
    assert vocabulary[:2] == ["[PAD]", "[unused0]"] and len(vocabulary) == 30522
    encoder = BertEncoder.from_preset(tmp_path)
    inputs = reference(minilm_dir)["inputs"]
    _assert_outputs_close(_numpy(encoder(inputs)), _numpy(minilm_encoder(inputs)),
                          inputs["padding_mask"])


def test_h5_files_without_layer_name_attributes(tmp_path):
    """Older Keras wrote no `name` attribute; the layer keys alone must be enough."""
    backbone = keras_hub_package.models.BertBackbone(
        vocabulary_size=20, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=10)
    backbone.save_to_preset(str(tmp_path))
    path = str(tmp_path / "model.weights.h5")
    with_names = read_weights_h5(path)
    with h5py.File(path, "a") as h5:
        h5.visititems(lambda name, item: item.attrs.__delitem__("name")
                      if name.endswith("vars") and "name" in item.attrs else None)

    without_names = read_weights_h5(path)

    assert sorted(without_names) == sorted(with_names) == sorted(w.path for w in backbone.weights)
    for name, value in with_names.items():
        np.testing.assert_array_equal(without_names[name], value)


def test_other_keras_hub_models_are_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "module": "keras_hub.src.models.gpt2.gpt2_backbone", "class_name": "GPT2Backbone",
        "config": {}, "registered_name": "keras_hub>GPT2Backbone"}))
    with pytest.raises(UnsupportedCheckpointError, match="'GPT2Backbone' is not supported"):
        load_checkpoint(tmp_path)


def _config(encoder):
    return {key: getattr(encoder, key) for key in (
        "vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
        "max_sequence_length", "num_segments", "dropout", "layer_norm_epsilon",
        "initializer_range")}
