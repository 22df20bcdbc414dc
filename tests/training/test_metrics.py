"""MaskedLMLoss and the MaskedLMPerplexity it feeds: same numbers as a hand computation,
one cross-entropy per step, and the link survives a `.keras` round trip. MaskedLMAccuracy:
Keras' SparseCategoricalAccuracy's numbers without an argmax. MaskedSparseCategoricalAccuracy:
the fraction right over labelled positions. Every metric's config round trip."""

import keras
import numpy as np
import pytest

from keras_bert_suite.training import (
    IGNORE_LABEL, MaskedLMAccuracy, MaskedLMLoss, MaskedLMPerplexity,
    MaskedSparseCategoricalAccuracy)
from tests.conftest import to_numpy
from tests.harness import check_config_round_trip
from tests.tiny_pretraining import RUN_EAGERLY, pretraining_batch, tiny_pretrainer


def _cross_entropy(logits, labels):
    """Per-prediction cross-entropy in float64, [B, P]."""
    logits = logits.astype("float64")
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def _batch(seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, (4, 5, 11)).astype("float32")
    labels = rng.integers(0, 11, (4, 5)).astype("int32")
    weights = (rng.random((4, 5)) > 0.3).astype("float32")
    return logits, labels, weights


def test_loss_is_the_weighted_mean_and_feeds_the_perplexity_once():
    loss, perplexity = MaskedLMLoss(), MaskedLMPerplexity()
    loss.link_perplexity(perplexity)
    keras_loss = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")
    batches = [_batch(0), _batch(1)]  # different numbers of real predictions
    for logits, labels, weights in batches:
        value = to_numpy(loss(labels, logits, sample_weight=weights))
        expected = (_cross_entropy(logits, labels) * weights).sum() / weights.sum()
        np.testing.assert_allclose(value, expected, rtol=1e-5)
        np.testing.assert_allclose(value, to_numpy(keras_loss(labels, logits, weights)),
                                   rtol=1e-6)
        perplexity.update_state(labels, logits, sample_weight=weights)  # Keras' metric call

    # exp of the mean over every real prediction of both batches (not a mean of per-batch
    # means), each batch counted once although update_state was called too.
    cross_entropy = np.concatenate([_cross_entropy(lg, lb)[w > 0] for lg, lb, w in batches])
    np.testing.assert_allclose(to_numpy(perplexity.result()), np.exp(cross_entropy.mean()),
                               rtol=1e-5)

    standalone = MaskedLMPerplexity()
    for logits, labels, weights in batches:
        standalone.update_state(labels, logits, sample_weight=weights)
    np.testing.assert_allclose(to_numpy(standalone.result()), to_numpy(perplexity.result()),
                               rtol=1e-6)


def test_accuracy_matches_keras_sparse_categorical_accuracy_over_weighted_batches():
    ours, keras_accuracy = MaskedLMAccuracy(), keras.metrics.SparseCategoricalAccuracy()
    batches = [_batch(0), _batch(1), _batch(2)]
    for logits, labels, weights in batches:
        # Make about half the predictions right, so the value is far from 0 and 1.
        rows = np.random.default_rng(3).random(labels.shape) < 0.5
        labels = np.where(rows, logits.argmax(-1), labels).astype("int32")
        ours.update_state(labels, logits, sample_weight=weights)
        keras_accuracy.update_state(labels, logits, sample_weight=weights)
    value = float(to_numpy(ours.result()))
    assert 0.3 < value < 0.8
    np.testing.assert_allclose(value, float(to_numpy(keras_accuracy.result())), rtol=1e-6)


def test_accuracy_counts_a_tie_with_the_label_as_correct():
    logits = np.array([[[1.0, 3.0, 3.0, 0.0], [2.0, 1.0, 0.0, 0.0]]], "float32")  # [1, 2, 4]
    labels = np.array([[2, 1]], "int32")  # tied at the max; below the max
    metric = MaskedLMAccuracy()
    metric.update_state(labels, logits)
    assert float(to_numpy(metric.result())) == 0.5


def _linked_metric(model):
    """(the compiled MLM loss, the MaskedLMPerplexity Keras updates and logs); the model
    must have run a step (Keras builds its compiled metrics then)."""
    loss = model._compile_loss._user_loss["mlm_logits"]
    metrics = [m for compiled in model.metrics for m in getattr(compiled, "metrics", [])
               if isinstance(m, MaskedLMPerplexity)]
    assert len(metrics) == 1
    return loss, metrics[0]


def test_pretrainer_perplexity_comes_from_the_loss_also_after_reloading(tmp_path):
    pretrainer = tiny_pretrainer()
    pretrainer.compile(run_eagerly=RUN_EAGERLY)
    x, y = pretraining_batch()
    history = pretrainer.fit(x, y, batch_size=4, epochs=1, verbose=0).history
    loss, metric = _linked_metric(pretrainer)
    assert isinstance(loss, MaskedLMLoss) and loss.perplexity is metric and metric.fed_by_loss
    np.testing.assert_allclose(history["mlm_logits_perplexity"],
                               np.exp(history["mlm_logits_loss"]), rtol=1e-5)

    path = str(tmp_path / "pretrainer.keras")
    pretrainer.save(path)
    restored = keras.saving.load_model(path)
    results = restored.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    loss, metric = _linked_metric(restored)
    assert isinstance(loss, MaskedLMLoss) and loss.perplexity is metric and metric.fed_by_loss
    np.testing.assert_allclose(results["mlm_logits_perplexity"],
                               np.exp(results["mlm_logits_loss"]), rtol=1e-5)


def test_token_accuracy_counts_labelled_positions_with_per_example_weights():
    logits, labels, _ = _batch(4)
    rng = np.random.default_rng(5)
    labels = np.where(rng.random(labels.shape) < 0.5, logits.argmax(-1), labels)
    labelled = rng.random(labels.shape) < 0.7
    y_true = np.where(labelled, labels, IGNORE_LABEL).astype("int32")
    example_weights = np.array([1.0, 0.0, 2.0, 1.0], "float32")  # one per example [B]
    metric = MaskedSparseCategoricalAccuracy()
    metric.update_state(y_true, logits, sample_weight=example_weights)
    weights = labelled * example_weights[:, None]
    expected = ((logits.argmax(-1) == labels) * weights).sum() / weights.sum()
    np.testing.assert_allclose(float(to_numpy(metric.result())), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("metric", [
    MaskedLMAccuracy(), MaskedLMAccuracy(name="mlm_accuracy", dtype="float32"),
    MaskedLMPerplexity(), MaskedLMPerplexity(name="ppl"),
    MaskedSparseCategoricalAccuracy(), MaskedSparseCategoricalAccuracy(ignore_label=-1, name="tags"),
], ids=lambda metric: f"{type(metric).__name__}-{metric.name}")
def test_config_round_trip_gives_the_same_metric(metric):
    restored = check_config_round_trip(metric)
    logits, labels, weights = _batch(6)
    for m in (metric, restored):
        m.update_state(labels, logits, sample_weight=weights)
    np.testing.assert_allclose(float(to_numpy(restored.result())),
                               float(to_numpy(metric.result())), rtol=1e-6, atol=1e-7)


def test_token_accuracy_saved_before_it_moved_still_loads():
    # A .keras file from before the move names the old module; Keras finds the class by
    # its registered name.
    restored = keras.saving.deserialize_keras_object({
        "module": "keras_bert_suite.models.token_losses",
        "class_name": "MaskedSparseCategoricalAccuracy",
        "registered_name": "keras_bert_suite>MaskedSparseCategoricalAccuracy",
        "config": {"name": "accuracy", "dtype": "float32", "ignore_label": -100}})
    assert isinstance(restored, MaskedSparseCategoricalAccuracy)
