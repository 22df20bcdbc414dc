"""Task heads on the real all-MiniLM-L6-v2 weights against transformers (torch, eval mode).

Our head weights are copied into transformers' BertFor* heads; logits must agree to 1e-4
on real sentence pairs (padding positions excluded: their values are undefined in BERT).
"""

import functools

import numpy as np
import pytest

from keras_bert_suite import (
    BertClassifier, BertEncoder, BertFeatureExtractor, BertMultipleChoice, BertSpanLabeler,
    BertTokenClassifier)
from keras_bert_suite.tasks.feature_extractor.model import LAYER_CHOICES
from tests.conftest import to_numpy
from tests.minilm_reference import PARITY_ATOL, PARITY_RTOL, reference
from tests.numerics import assert_close

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def encoder(minilm_dir):
    return BertEncoder.from_preset(minilm_dir, return_hidden_states=True)


@pytest.fixture(scope="module")
def inputs(minilm_dir):
    return reference(minilm_dir)["inputs"]


def _torch_inputs(inputs):
    return {"input_ids": torch.from_numpy(inputs["token_ids"]).long(),
            "token_type_ids": torch.from_numpy(inputs["segment_ids"]).long(),
            "attention_mask": torch.from_numpy(inputs["padding_mask"]).long()}


@functools.lru_cache(maxsize=None)
def _hf_model(minilm_dir, class_name, **kwargs):
    return getattr(transformers, class_name).from_pretrained(minilm_dir, **kwargs).eval()


def _copy_dense(dense, linear):
    """Our Dense [in, out] -> torch Linear weight [out, in]."""
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(to_numpy(dense.kernel).T))
        linear.bias.copy_(torch.from_numpy(to_numpy(dense.bias)))


def _run_hf(model, inputs):
    with torch.no_grad():
        return model(**_torch_inputs(inputs))


def _assert_close(ours, theirs, real=None):
    ours, theirs = to_numpy(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape
    if real is not None:  # compare real (non-padding) positions only
        ours, theirs = ours[real], theirs[real]
    assert_close(ours, theirs, rtol=PARITY_RTOL, atol=PARITY_ATOL)


def test_sequence_classification(encoder, inputs, minilm_dir):
    classifier = BertClassifier(encoder, num_classes=3)
    theirs = _hf_model(minilm_dir, "BertForSequenceClassification", num_labels=3)
    _copy_dense(classifier.classifier_head, theirs.classifier)
    _assert_close(classifier(inputs), _run_hf(theirs, inputs).logits.numpy())


def test_question_answering(encoder, inputs, minilm_dir):
    labeler = BertSpanLabeler(encoder)
    theirs = _hf_model(minilm_dir, "BertForQuestionAnswering")
    _copy_dense(labeler.span_head, theirs.qa_outputs)
    expected = _run_hf(theirs, inputs)
    ours = labeler(inputs)
    real = inputs["padding_mask"].astype(bool)
    _assert_close(ours["start_logits"], expected.start_logits.numpy(), real)
    _assert_close(ours["end_logits"], expected.end_logits.numpy(), real)
    assert (to_numpy(ours["start_logits"])[~real] == -1e9).all()  # padding can never win


def test_token_classification(encoder, inputs, minilm_dir):
    tagger = BertTokenClassifier(encoder, num_classes=5)
    theirs = _hf_model(minilm_dir, "BertForTokenClassification", num_labels=5)
    _copy_dense(tagger.classifier_head, theirs.classifier)
    _assert_close(tagger(inputs), _run_hf(theirs, inputs).logits.numpy(),
                  inputs["padding_mask"].astype(bool))


def test_multiple_choice(encoder, inputs, minilm_dir):
    # The four sentence pairs as 2 questions x 2 choices: [B=2, C=2, T].
    choices = {name: value.reshape(2, 2, -1) for name, value in inputs.items()}
    chooser = BertMultipleChoice(encoder, num_choices=2)
    theirs = _hf_model(minilm_dir, "BertForMultipleChoice")
    _copy_dense(chooser.choice_head, theirs.classifier)
    _assert_close(chooser(choices), _run_hf(theirs, choices).logits.numpy())


def _expected_features(layers, hidden_states):
    """The strategies computed from transformers' output_hidden_states (L + 1 tensors)."""
    if layers == "embeddings":
        return hidden_states[0]
    if layers == "last_hidden":
        return hidden_states[-1]
    if layers == "second_to_last":
        return hidden_states[-2]
    if layers == "sum_all":
        return sum(hidden_states[1:])
    if layers == "sum_last_four":
        return sum(hidden_states[-4:])
    if layers == "concat_last_four":
        return np.concatenate(hidden_states[-4:], axis=-1)
    # An untrained scalar mix: equal weights 1/L, gamma 1.
    return sum(hidden_states[1:]) / (len(hidden_states) - 1)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_feature_extractor_layers(encoder, inputs, minilm_dir, pooling):
    theirs = _hf_model(minilm_dir, "BertModel")
    with torch.no_grad():
        outputs = theirs(**_torch_inputs(inputs), output_hidden_states=True)
    hidden_states = [h.numpy() for h in outputs.hidden_states]
    real = inputs["padding_mask"].astype(bool)
    for layers in LAYER_CHOICES:
        extractor = BertFeatureExtractor(encoder, layers=layers, pooling=pooling)
        ours = extractor(inputs)
        tokens = _expected_features(layers, hidden_states)
        _assert_close(ours["token_embeddings"], tokens, real)
        if pooling == "cls":
            sentence = tokens[:, 0]
        else:
            mask = real[..., None]
            sentence = (tokens * mask).sum(1) / mask.sum(1)
        _assert_close(ours["sentence_embedding"], sentence)


def test_normalized_mean_pooling_is_the_sentence_transformers_embedding(
        encoder, inputs, minilm_dir):
    """all-MiniLM-L6-v2's published recipe: mean over real tokens, then L2 normalisation."""
    theirs = _hf_model(minilm_dir, "BertModel")
    tokens = _run_hf(theirs, inputs).last_hidden_state.numpy()
    mask = inputs["padding_mask"][..., None].astype("float32")
    mean = (tokens * mask).sum(1) / mask.sum(1)
    expected = mean / np.linalg.norm(mean, axis=-1, keepdims=True)
    extractor = BertFeatureExtractor(encoder, pooling="mean", normalize=True)
    ours = to_numpy(extractor(inputs)["sentence_embedding"])
    _assert_close(ours, expected)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=-1), 1.0, rtol=1e-5)


def test_from_preset_classifies_raw_text_like_transformers(minilm_dir):
    """from_preset: real encoder weights, a fresh BERT-initialised head, and a preprocessor
    whose packing of raw sentence pairs matches transformers' tokenizer."""
    from tests.minilm_reference import SENTENCE_PAIRS

    inputs = reference(minilm_dir)["inputs"]
    length = inputs["token_ids"].shape[1]
    classifier = BertClassifier.from_preset("minilm_l6_h384_uncased", num_classes=2,
                                            sequence_length=length)
    kernel = to_numpy(classifier.classifier_head.kernel)
    assert np.abs(kernel).max() <= 0.04 and 0.012 < kernel.std() < 0.022  # trunc. N(0, 0.02)
    first, second = (list(part) for part in zip(*SENTENCE_PAIRS))
    packed = classifier.preprocessor((first, second))
    for name, value in inputs.items():
        np.testing.assert_array_equal(packed[name], value)

    theirs = _hf_model(minilm_dir, "BertForSequenceClassification", num_labels=2)
    _copy_dense(classifier.classifier_head, theirs.classifier)
    _assert_close(classifier.predict((first, second), verbose=0),
                  _run_hf(theirs, inputs).logits.numpy())
