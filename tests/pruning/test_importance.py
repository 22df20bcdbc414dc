"""Importance scores and `prune`: head scores are the calibration-loss increase that masking
the head really causes (checked against masked copies of a real MiniLM classifier), neuron
scores follow their formulas, and `prune` removes the globally least important units."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertClassifier, BertEncoder, BertFeatureExtractor
from keras_bert_suite.pruning import (
    head_importance, least_important, mask_units, neuron_importance, prune, prune_heads,
    prune_units)
from tests.conftest import to_numpy
from tests.numerics import assert_close


def _loss(model, x, y):
    return model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)["loss"]


@pytest.mark.real
def test_head_scores_are_the_loss_increase_of_masking_the_head(classifier, reviews):
    texts, labels = reviews[0][:8], reviews[1][:8]
    # 2 heads per layer of the real MiniLM (12 heads): one evaluation per head.
    model = prune_heads(classifier, {layer: list(range(2, 12)) for layer in range(6)})
    x = model.preprocessor(texts)
    x = {name: to_numpy(value) for name, value in x.items()}
    outputs = to_numpy(model(x))
    scores = head_importance(model, (texts, labels), verbose=0)
    assert [score.shape for score in scores] == [(2,)] * 6
    np.testing.assert_array_equal(to_numpy(model(x)), outputs)  # the weights were restored

    ranked = sorted((score, layer, head) for layer, layer_scores in enumerate(scores)
                    for head, score in enumerate(layer_scores))
    (low, low_layer, low_head), (high, high_layer, high_head) = ranked[0], ranked[-1]
    base = _loss(model, x, labels)
    without_low = _loss(mask_units(model, {low_layer: [low_head]}), x, labels)
    without_high = _loss(mask_units(model, {high_layer: [high_head]}), x, labels)
    # Removing the least important head costs less than removing the most important one,
    # and each score is what masking that head (in a separately built copy) costs.
    assert without_low - base < without_high - base
    assert_close([without_low - base, without_high - base], [low, high], rtol=1e-3, atol=2e-6)


def _tiny(num_classes=2, sequence_length=16):
    return BertClassifier.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False,
                                      num_classes=num_classes, sequence_length=sequence_length)


TEXTS = ["a gripping drama", "a dull mess", "fine acting", "a bore", "sharp and funny",
         "tedious"]
LABELS = [1, 0, 1, 0, 1, 0]


def _hidden_states(encoder, x):
    """The embedding output and every layer's output, from a copy of `encoder`."""
    copy = BertEncoder.from_config({**encoder.get_config(), "return_hidden_states": True})
    copy.set_weights(encoder.get_weights())
    return to_numpy(copy(x)["hidden_states"])


def test_neuron_scores_follow_their_formulas():
    classifier = _tiny()
    blocks = classifier.encoder.transformer_layers
    w_in = [to_numpy(block.intermediate_dense.kernel) for block in blocks]  # [H, I]
    w_out = [to_numpy(block.output_dense.kernel) for block in blocks]  # [I, H]
    magnitude = neuron_importance(classifier)
    for layer in range(2):
        assert_close(magnitude[layer], np.linalg.norm(w_in[layer], axis=0)
                     * np.linalg.norm(w_out[layer], axis=1))

    # With inputs: mean |activation| over the real tokens x the output row's norm. The
    # activations here come from each block's input in the encoder's hidden states.
    x = {name: to_numpy(value) for name, value in classifier.preprocessor(TEXTS).items()}
    hidden = _hidden_states(classifier.encoder, x)  # [B, L + 1, T, H]
    real = x["padding_mask"].astype(bool)
    mask = real[:, None, None, :]
    weighted = neuron_importance(classifier, (TEXTS, LABELS), batch_size=4, verbose=0)
    for layer, block in enumerate(blocks):
        activations = to_numpy(block.intermediate_activations(hidden[:, layer], mask))
        # The block's output is LN(x' + act W_out + b): the activations are the FFN's.
        x_prime = to_numpy(block._attention_sublayer(
            keras.ops.convert_to_tensor(hidden[:, layer]), keras.ops.convert_to_tensor(mask)))
        output = to_numpy(block.output_layer_norm(
            x_prime + activations @ w_out[layer] + to_numpy(block.output_dense.bias)))
        assert_close(output, hidden[:, layer + 1], rtol=1e-4, atol=1e-5)
        expected = np.abs(activations[real]).mean(0) * np.linalg.norm(w_out[layer], axis=1)
        assert_close(weighted[layer], expected, rtol=1e-4, atol=1e-7)


def test_prune_removes_the_globally_least_important_units():
    classifier = _tiny()
    data = (TEXTS, LABELS)
    head_scores = head_importance(classifier, data, verbose=0)
    neuron_scores = neuron_importance(classifier, data, verbose=0)
    smaller = prune(classifier, data, head_fraction=0.5, ffn_fraction=0.25, verbose=0)
    assert type(smaller) is BertClassifier
    assert sum(smaller.encoder.layer_num_heads) == 2  # 4 heads, half removed
    assert sum(smaller.encoder.layer_intermediate_dims) == 768  # 1024 neurons, a quarter out
    expected = prune_units(classifier, least_important(head_scores, 0.5),
                           least_important(neuron_scores, 0.25))
    assert expected.encoder.get_config() == smaller.encoder.get_config()
    x = classifier.preprocessor(TEXTS)
    assert_close(to_numpy(smaller(x)), to_numpy(expected(x)))
    assert smaller.preprocessor is classifier.preprocessor
    # Fractions of 0 change nothing but give a new model.
    same = prune(classifier, data, verbose=0)
    assert same is not classifier and not same.encoder.is_pruned
    assert_close(to_numpy(same(x)), to_numpy(classifier(x)))


def test_prune_takes_encoder_inputs_and_datasets():
    import tensorflow as tf

    classifier = _tiny()
    x = {name: to_numpy(value) for name, value in classifier.preprocessor(TEXTS).items()}
    from_text = head_importance(classifier, (TEXTS, LABELS), verbose=0)
    from_inputs = head_importance(classifier, (x, np.array(LABELS)), verbose=0)
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4)
    from_dataset = head_importance(classifier, dataset, verbose=0)
    for layer in range(2):
        assert_close(from_inputs[layer], from_text[layer], rtol=1e-4, atol=1e-6)
        assert_close(from_dataset[layer], from_text[layer], rtol=1e-4, atol=1e-6)


def test_least_important_keeps_one_unit_per_layer():
    scores = [np.array([0.3, -0.1, 0.2]), np.array([0.0, 0.5]), np.array([-1.0])]
    assert least_important(scores, 0.0) == {}
    # 2 of 6: the lowest (-1.0) is layer 2's only unit and stays.
    assert least_important(scores, 0.34) == {0: [1], 1: [0]}
    assert least_important(scores, 0.99) == {0: [1, 2], 1: [0]}  # all that can go


@pytest.mark.parametrize("call, message", [
    (lambda m: prune(m, (TEXTS, LABELS), head_fraction=1.0),
     r"head_fraction must be a number in \[0, 1\).*got 1.0"),
    (lambda m: prune(m, (TEXTS, LABELS), ffn_fraction=-0.1), r"ffn_fraction must be a number"),
    (lambda m: prune(m, (TEXTS, LABELS), head_fraction="half"), r"head_fraction must be"),
    (lambda m: prune(m.encoder, (TEXTS, LABELS), head_fraction=0.5),
     r"prune scores heads with a task's loss: pass a task model"),
    (lambda m: head_importance(m, TEXTS), r"head_importance needs labels"),
    (lambda m: head_importance(m, None), r"head_importance needs calibration data"),
    (lambda m: head_importance(m, ([1, 2], [0, 1])),
     r"calibration inputs must be a dict of encoder inputs"),
    (lambda m: neuron_importance(m.encoder, TEXTS),
     r"neuron_importance got raw text but BertEncoder has no preprocessor"),
])
def test_bad_calls_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call(_tiny())


def test_a_task_without_a_loss_cannot_score_heads():
    extractor = BertFeatureExtractor.from_preset(
        "bert_uncased_L-2_H-128_A-2", load_weights=False, sequence_length=16)
    with pytest.raises(ValueError, match=r"BertFeatureExtractor has none.*compile\(loss=...\)"):
        head_importance(extractor, (TEXTS, LABELS), verbose=0)
