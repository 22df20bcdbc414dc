"""KerasHub presets of RoBERTa, XLM-R, DistilBERT, ALBERT and ELECTRA, both ways, on tiny random
models (LayerNorm weights randomized too) and real sentences: ours -> KerasHub -> ours is exact;
KerasHub's own from_preset loads what we write and computes our outputs; a preset KerasHub's
save_to_preset wrote reads into ours with KerasHub's outputs. Where KerasHub's math differs
(ELECTRA's tanh GELU and tanh pooler) the gap is measured, then swapped out to check the
weights exactly."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertClassifier, BertEncoder, BertPretrainer, save_keras_hub
from keras_bert_suite.checkpoints import keras_hub_backbones
from keras_bert_suite.checkpoints.keras_hub_writer import write_keras_hub
from keras_bert_suite.families.bert_config import ENCODER_CONFIG_KEYS
from tests.conftest import to_numpy
from tests.families.conftest import family_inputs
from tests.numerics import assert_close

keras_hub = pytest.importorskip("keras_hub")

# MiniLM's vocabulary (family_inputs tokenizes real sentences with it), width 32, 2 layers
# (ALBERT: 4 layers in 2 groups of 2 blocks, so group order and inner order both matter).
_BASE = dict(vocabulary_size=30522, num_layers=2, num_heads=4, hidden_dim=32,
             intermediate_dim=37, max_sequence_length=24, dropout=0.0)
ROBERTA = {**_BASE, "num_segments": 1, "position_offset": 2, "layer_norm_epsilon": 1e-5}
FAMILIES = {  # KerasHub backbone -> (our encoder arguments, family_inputs' name)
    "RobertaBackbone": (ROBERTA, "roberta"),
    "XLMRobertaBackbone": (ROBERTA, "xlm-roberta"),
    "DistilBertBackbone": ({**_BASE, "num_segments": 0, "pooler_activation": "relu"},
                           "distilbert"),
    "AlbertBackbone": ({**_BASE, "num_layers": 4, "embedding_dim": 16,
                        "activation": "gelu_approximate", "num_layer_groups": 2,
                        "layers_per_group": 2}, "albert"),
    "ElectraBackbone": ({**_BASE, "embedding_dim": 16, "pooler_activation": "gelu"},
                        "electra"),
}
# The same math in two implementations (KerasHub splits query/key/value and heads, we fuse
# them): float32 rounding only. Measured on the three backends: sequence, pooled outputs and
# logits within 3.5e-6 relative where |x| >= 0.1 of the largest value, and 5.2e-7 of the
# largest value anywhere (exactly equal on torch for RoBERTa, XLM-R, DistilBERT); a wrong
# weight, block order or position row moves them by 1e-2 or more.
SAME_MATH_RTOL, ATOL_OF_SCALE = 1e-4, 1e-5
# ELECTRA: KerasHub's tanh GELU against ours (exact, as ELECTRA was trained). Measured on these
# random models, the same on the three backends: sequence_output 7.7e-5 of its largest value
# apart (5.2e-4 relative where |x| >= 0.1 of it); 1e-3 of it leaves 13x room and still
# catches a wrong weight. (KerasHub's tanh pooler against our GELU one: 0.84 of the largest
# value apart, another function: compared only with GELU swapped in.)
TANH_GELU_ATOL_OF_SCALE = 1e-3


def _randomize(variables, seed):
    """Every variable random, LayerNorm gammas around 1 (no released model keeps them at 1
    and 0); the same numbers on every backend."""
    rng = np.random.default_rng(seed)
    for path, variable in variables:
        shape = tuple(variable.shape)
        value = rng.normal(0.0, 0.2 if path.endswith(("gamma", "beta")) else 0.1, shape)
        if path.endswith("gamma"):
            value += 1.0
        variable.assign(value.astype("float32"))


def _our_encoder(backbone_class, seed=0, released_roberta=True):
    """Our encoder of the family, random. `released_roberta`: RoBERTa's segment row and the
    table rows below the offset zero, as in the released checkpoints (and what reading a
    KerasHub preset gives), so that the round trip can be exact."""
    encoder = BertEncoder(**FAMILIES[backbone_class][0])
    weights = encoder.weight_map()
    _randomize(weights.items(), seed)
    if released_roberta and "position_offset" in FAMILIES[backbone_class][0]:
        table = to_numpy(weights["embeddings/position_embedding"])
        table[:2] = 0.0
        weights["embeddings/position_embedding"].assign(table)
        weights["embeddings/segment_embedding"].assign(np.zeros((1, 32), "float32"))
    return encoder


def _classifier(encoder, seed=1):
    classifier = BertClassifier(encoder, num_classes=3, dropout=0.0)
    _randomize([(f"head/{v.path}", v) for v in classifier.classifier_head.weights], seed)
    return classifier


def _save(model, directory, backbone_class):
    """save_keras_hub, but XLM-R through the writer: save_keras_hub picks XLMRobertaBackbone
    from an XLM-R SentencePiece tokenizer (checked in test_backbone_choice)."""
    if backbone_class != "XLMRobertaBackbone":
        return save_keras_hub(model, directory)
    encoder = model.encoder
    weights = {name: to_numpy(v) for name, v in encoder.weight_map().items()}
    config = {key: getattr(encoder, key) for key in ENCODER_CONFIG_KEYS}
    head = model.classifier_head
    return write_keras_hub(
        directory, config, weights, task="XLMRobertaTextClassifier",
        task_arguments={"num_classes": 3, "dropout": 0.0},
        task_weights={"logits/kernel": to_numpy(head.kernel), "logits/bias": to_numpy(head.bias)},
        backbone_class="XLMRobertaBackbone")


def _weights(model):
    return {name: to_numpy(variable) for name, variable in model.weight_map().items()}


def _config(encoder):
    return {key: value for key, value in encoder.get_config().items() if key != "name"}


def _their_inputs(model, inputs):
    return {name: inputs[name] for name in model.input}


def _sequence_close(theirs, ours, mask, atol_of_scale=ATOL_OF_SCALE, rtol=SAME_MATH_RTOL):
    real = mask.astype(bool)  # RoBERTa: KerasHub numbers padding positions as tokens
    expected = to_numpy(ours)[real]
    assert_close(to_numpy(theirs)[real], expected, rtol=rtol,
                 atol=atol_of_scale * np.abs(expected).max())


def _gap(name, actual, expected):
    """Prints (pytest -s) how far KerasHub's math puts it from ours, for the docs."""
    difference, scale = np.abs(actual - expected), np.abs(expected).max()
    print(f"\n{name} ({keras.backend.backend()}): max abs {difference.max():.3g} = "
          f"{difference.max() / scale:.3g} of max |x| {scale:.3g}")


class _ExactMath:
    """Swaps ours into KerasHub's ELECTRA (exact GELU in the blocks, GELU on pooled_dense) and
    back on exit: then only the weights can make it differ from ours."""

    def __init__(self, backbone):
        self.layers = [(layer._feedforward_intermediate_dense, keras.activations.gelu)
                       for layer in backbone.transformer_layers]
        self.layers.append((backbone.pooled_dense, keras.activations.gelu))

    def __enter__(self):
        self.saved = [layer.activation for layer, _ in self.layers]
        for layer, activation in self.layers:
            layer.activation = activation

    def __exit__(self, *error):
        for (layer, _), activation in zip(self.layers, self.saved):
            layer.activation = activation


@pytest.fixture(scope="module", params=list(FAMILIES))
def exported(request, tmp_path_factory):
    """(backbone class, our model, the preset we wrote of it): a BertClassifier where KerasHub
    has the family's TextClassifier (RoBERTa's and DistilBERT's hold our pooler), else the
    encoder."""
    backbone_class = request.param
    encoder = _our_encoder(backbone_class)
    has_classifier = keras_hub_backbones.BACKBONES[backbone_class].classifier is not None
    model = _classifier(encoder) if has_classifier else encoder
    directory = tmp_path_factory.mktemp(backbone_class)
    return backbone_class, model, _save(model, directory, backbone_class)


def test_ours_to_keras_hub_to_ours_is_exact(exported):
    backbone_class, model, path = exported
    encoder = getattr(model, "encoder", model)
    # preprocessor=None: the presets have no tokenizer (MiniLM's vocabulary is not theirs)
    back = BertClassifier.from_preset(path, preprocessor=None) if model is not encoder else (
        BertEncoder.from_preset(path))
    back_encoder = getattr(back, "encoder", back)
    assert _config(back_encoder) == _config(encoder)
    expected, actual = _weights(encoder), _weights(back_encoder)
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)
    if model is not encoder:
        assert back.num_classes == 3
        for variable in ("kernel", "bias"):
            np.testing.assert_array_equal(to_numpy(getattr(back.classifier_head, variable)),
                                          to_numpy(getattr(model.classifier_head, variable)))


def test_keras_hub_loads_what_we_wrote_and_computes_ours(exported):
    backbone_class, model, path = exported
    encoder = getattr(model, "encoder", model)
    inputs = family_inputs(FAMILIES[backbone_class][1])
    theirs = getattr(keras_hub.models, backbone_class).from_preset(path)
    ours = encoder(inputs)
    outputs = theirs(_their_inputs(theirs, inputs))
    sequence = outputs["sequence_output"] if isinstance(outputs, dict) else outputs
    if backbone_class == "ElectraBackbone":
        _gap("ELECTRA sequence_output, KerasHub's tanh GELU", to_numpy(sequence)[
            inputs["padding_mask"] == 1], to_numpy(ours["sequence_output"])[
            inputs["padding_mask"] == 1])
        _sequence_close(sequence, ours["sequence_output"], inputs["padding_mask"],
                        atol_of_scale=TANH_GELU_ATOL_OF_SCALE, rtol=0)
        with _ExactMath(theirs):
            outputs = theirs(_their_inputs(theirs, inputs))
        assert_close(outputs["pooled_output"], ours["pooled_output"], rtol=SAME_MATH_RTOL,
                     atol=ATOL_OF_SCALE)
        sequence = outputs["sequence_output"]
    elif isinstance(outputs, dict):  # ALBERT: the same pooler too
        assert_close(outputs["pooled_output"], ours["pooled_output"], rtol=SAME_MATH_RTOL,
                     atol=ATOL_OF_SCALE)
    _sequence_close(sequence, ours["sequence_output"], inputs["padding_mask"])

    if model is not encoder:  # the classifier: KerasHub's TextClassifier gives our logits
        task = getattr(keras_hub.models, backbone_class.replace("Backbone", "TextClassifier"))
        theirs = task.from_preset(path, preprocessor=None)
        logits = model(inputs)
        assert_close(theirs(_their_inputs(theirs, inputs)), logits, rtol=SAME_MATH_RTOL,
                     atol=ATOL_OF_SCALE * np.abs(to_numpy(logits)).max())


def test_roberta_segment_row_is_added_to_the_positions(tmp_path):
    """A fine-tuned RoBERTa has a non-zero segment row (every token reads it) and rows below
    the offset: KerasHub gets the row added to its table (what its own converter does) and
    computes our outputs at every real token."""
    encoder = _our_encoder("RobertaBackbone", seed=3, released_roberta=False)
    path = save_keras_hub(encoder, tmp_path / "roberta")
    theirs = keras_hub.models.RobertaBackbone.from_preset(path)
    inputs = family_inputs("roberta")
    _sequence_close(theirs(_their_inputs(theirs, inputs)), encoder(inputs)["sequence_output"],
                    inputs["padding_mask"])
    weights = _weights(encoder)
    np.testing.assert_array_equal(
        to_numpy(theirs.embeddings.position_embedding.position_embeddings),
        weights["embeddings/position_embedding"][2:] + weights["embeddings/segment_embedding"])


@pytest.mark.parametrize("backbone_class", list(FAMILIES))
def test_preset_keras_hub_wrote_reads_into_ours(backbone_class, tmp_path):
    """KerasHub builds, randomizes and saves its own model (its TextClassifier where it has
    one: the pooler and head come from task.weights.h5); ours computes its outputs."""
    arguments, inputs_name = FAMILIES[backbone_class]
    config = _config(BertEncoder(**arguments))  # what reading the preset must give
    family = keras_hub_backbones.BACKBONES[backbone_class]
    backbone = getattr(keras_hub.models, backbone_class)(**family.arguments(config))
    model = backbone
    if family.classifier is not None:
        model = getattr(keras_hub.models, family.classifier)(backbone, num_classes=3,
                                                             preprocessor=None, dropout=0.0)
    _randomize([(variable.path, variable) for variable in model.weights], seed=5)
    model.save_to_preset(str(tmp_path))

    inputs = family_inputs(inputs_name)
    if family.classifier is not None:
        ours = BertClassifier.from_preset(str(tmp_path), preprocessor=None)
        logits = to_numpy(model(_their_inputs(model, inputs)))
        assert_close(ours(inputs), logits, rtol=SAME_MATH_RTOL,
                     atol=ATOL_OF_SCALE * np.abs(logits).max())
        encoder = ours.encoder
    else:
        encoder = BertEncoder.from_preset(str(tmp_path))
    assert _config(encoder) == config  # the family's configuration
    theirs = backbone(_their_inputs(backbone, inputs))
    ours = encoder(inputs)
    if backbone_class == "ElectraBackbone":
        real = inputs["padding_mask"] == 1
        _gap("ELECTRA sequence_output of KerasHub's preset, tanh GELU",
             to_numpy(ours["sequence_output"])[real], to_numpy(theirs["sequence_output"])[real])
        _sequence_close(ours["sequence_output"], theirs["sequence_output"],
                        inputs["padding_mask"], atol_of_scale=TANH_GELU_ATOL_OF_SCALE, rtol=0)
        with _ExactMath(backbone):
            theirs = backbone(_their_inputs(backbone, inputs))
    sequence = theirs["sequence_output"] if isinstance(theirs, dict) else theirs
    _sequence_close(ours["sequence_output"], sequence, inputs["padding_mask"])
    if isinstance(theirs, dict):
        assert_close(ours["pooled_output"], theirs["pooled_output"], rtol=SAME_MATH_RTOL,
                     atol=ATOL_OF_SCALE)


def test_backbone_choice():
    """XLM-R's SentencePiece tokenizer picks XLMRobertaBackbone for RoBERTa's architecture."""
    config = _config(BertEncoder(**ROBERTA))
    assert keras_hub_backbones.backbone_for(config).class_name == "RobertaBackbone"
    assert keras_hub_backbones.backbone_for(
        config, sentencepiece=True).class_name == "XLMRobertaBackbone"


@pytest.mark.parametrize("change, message", [
    (("RobertaBackbone", {"layer_norm_epsilon": 1e-12}),
     r"RobertaBackbone cannot hold this encoder's layer_norm_epsilon=1e-12 \(it holds 1e-05\)"),
    (("DistilBertBackbone", {"pooler_activation": "tanh", "activation": "gelu_approximate"}),
     r"DistilBertBackbone cannot hold this encoder's activation='gelu_approximate' \(it holds "
     r"'gelu'\), pooler_activation='tanh' \(it holds 'relu'\)"),
    (("AlbertBackbone", {"num_layers": 3}), r"AlbertBackbone projects embeddings .* runs each "
                                            r"of num_layer_groups groups .*\(here 3 / 2\)"),
    (("ElectraBackbone", {"embedding_dim": 32}),
     r"ElectraBackbone cannot hold this encoder's embedding_dim=32 \(it holds None\)"),
])
def test_what_keras_hub_cannot_hold_is_refused(change, message, tmp_path):
    backbone_class, arguments = change
    encoder = BertEncoder(**{**FAMILIES[backbone_class][0], "vocabulary_size": 64, **arguments})
    with pytest.raises(ValueError, match=rf"save_keras_hub: .*{message}.*save_huggingface"):
        save_keras_hub(encoder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_heads_keras_hub_has_no_family_task_for(tmp_path, caplog):
    encoder = BertEncoder(**{**FAMILIES["RobertaBackbone"][0], "vocabulary_size": 64})
    with pytest.raises(ValueError, match="BertMaskedLM only.*RobertaBackbone.*model.encoder"):
        save_keras_hub(BertPretrainer(encoder), tmp_path / "mlm")
    electra = BertEncoder(**{**FAMILIES["ElectraBackbone"][0], "vocabulary_size": 64})
    path = save_keras_hub(BertClassifier(electra, num_classes=2), tmp_path / "electra")
    assert "no task for BertClassifier: only its encoder is exported (a ElectraBackbone" \
        in caplog.text
    assert "applies tanh to its pooled_dense" in caplog.text
    keras_hub.models.ElectraBackbone.from_preset(path)


@pytest.mark.parametrize("backbone_class", ["DistilBertBackbone", "ElectraBackbone"])
def test_wordpiece_tokenizer_is_written(backbone_class, tmp_path):
    """DistilBERT's and ELECTRA's KerasHub tokenizers are WordPiece: written from ours, they
    split real text into our ids, and the reader finds the vocabulary and casing."""
    from keras_bert_suite import BertTokenizer
    from keras_bert_suite.checkpoints import load_checkpoint
    from keras_bert_suite.text import wordpiece_files
    from tests.families.conftest import SENTENCE_PAIRS

    ours = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    path = save_keras_hub(BertEncoder(**FAMILIES[backbone_class][0]), tmp_path / "out",
                          vocabulary=ours)
    theirs = getattr(keras_hub.models, backbone_class.replace("Backbone", "Tokenizer")
                     ).from_preset(path)
    texts = [text for pair in SENTENCE_PAIRS for text in pair] + ["Café déjà vu: a résumé."]
    assert [to_numpy(ids).tolist() for ids in theirs(texts)] == ours.encode_batch(texts)
    checkpoint = load_checkpoint(path, load_weights=False)
    assert wordpiece_files.lowercase(checkpoint.directory) is True
    vocabulary_file = wordpiece_files.vocabulary_file(checkpoint.directory)
    assert open(vocabulary_file).read().split() == ours.get_vocabulary()
