"""The losses in training.losses against NumPy by hand, their config round trips, and the
`.keras` entries of files saved before they moved (same registered names)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_bert_suite import backend_kernels
from keras_bert_suite.training import (
    IGNORE_LABEL, MaskedLMLoss, MaskedSparseCategoricalCrossentropy)
from keras_bert_suite.training.losses import label_logits, sparse_cross_entropy_from_logits
from tests.conftest import to_numpy
from tests.harness import check_config_round_trip

RTOL, ATOL = 1e-5, 1e-6


def _numpy_cross_entropy(logits, labels):
    """Per-position cross-entropy in float64: logits [..., V], labels [...] -> [...]."""
    logits = logits.astype("float64")
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None].astype("int64"), -1)[..., 0]


def _logits_and_labels(seed, shape=(3, 6), classes=9):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, (*shape, classes)).astype("float32")
    labels = rng.integers(0, classes, shape).astype("int32")
    return logits, labels


def test_cross_entropy_matches_numpy_by_the_fast_and_the_portable_route():
    logits, labels = _logits_and_labels(0)
    expected = _numpy_cross_entropy(logits, labels)
    np.testing.assert_allclose(to_numpy(sparse_cross_entropy_from_logits(labels, logits)),
                               expected, rtol=RTOL, atol=ATOL)
    # The portable form (JAX's route) on this backend too, so every route is checked here.
    logits_t = ops.convert_to_tensor(logits)
    portable = ops.logsumexp(logits_t, axis=-1) - label_logits(labels, logits_t)
    np.testing.assert_allclose(to_numpy(portable), expected, rtol=RTOL, atol=ATOL)
    fast = backend_kernels.sparse_cross_entropy(labels, logits_t)
    if fast is not None:
        np.testing.assert_allclose(to_numpy(fast), expected, rtol=RTOL, atol=ATOL)


def test_masked_lm_loss_is_the_weighted_mean_over_real_predictions():
    logits, labels = _logits_and_labels(1)
    weights = (np.random.default_rng(2).random(labels.shape) > 0.4).astype("float32")
    value = to_numpy(MaskedLMLoss()(labels, logits, sample_weight=weights))
    expected = (_numpy_cross_entropy(logits, labels) * weights).sum() / weights.sum()
    np.testing.assert_allclose(value, expected, rtol=RTOL, atol=ATOL)


def test_token_loss_averages_over_labelled_positions_only():
    logits, labels = _logits_and_labels(3)
    labelled = np.random.default_rng(4).random(labels.shape) > 0.5
    labelled[0, 0] = True  # at least one position counts
    y_true = np.where(labelled, labels, IGNORE_LABEL).astype("int32")
    value = to_numpy(MaskedSparseCategoricalCrossentropy()(y_true, logits))
    expected = _numpy_cross_entropy(logits, labels)[labelled].mean()
    np.testing.assert_allclose(value, expected, rtol=RTOL, atol=ATOL)


def test_token_loss_is_zero_not_nan_when_nothing_is_labelled():
    logits, labels = _logits_and_labels(5)
    value = to_numpy(MaskedSparseCategoricalCrossentropy()(np.full_like(labels, -100), logits))
    assert value == 0.0


def test_token_loss_honours_another_ignore_label():
    logits, labels = _logits_and_labels(6)
    y_true = labels.copy()
    y_true[:, ::2] = -1
    value = to_numpy(MaskedSparseCategoricalCrossentropy(ignore_label=-1)(y_true, logits))
    expected = _numpy_cross_entropy(logits, labels)[:, 1::2].mean()
    np.testing.assert_allclose(value, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("loss", [
    MaskedLMLoss(), MaskedLMLoss(name="mlm", reduction="sum", dtype="float32"),
    MaskedSparseCategoricalCrossentropy(),
    MaskedSparseCategoricalCrossentropy(ignore_label=-1, name="tags", reduction="sum"),
], ids=lambda loss: f"{type(loss).__name__}-{loss.name}")
def test_config_round_trip_gives_the_same_loss(loss):
    restored = check_config_round_trip(loss)
    logits, labels = _logits_and_labels(7)
    np.testing.assert_allclose(to_numpy(restored(labels, logits)), to_numpy(loss(labels, logits)),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("class_name, old_module", [
    ("MaskedLMLoss", "keras_bert_suite.training.metrics"),
    ("MaskedSparseCategoricalCrossentropy", "keras_bert_suite.models.token_losses"),
])
def test_entries_saved_before_the_move_still_load(class_name, old_module):
    # What a .keras file written before the losses moved holds: the old module, the same
    # registered name; Keras looks the class up by that name.
    entry = {"module": old_module, "class_name": class_name,
             "registered_name": f"keras_bert_suite>{class_name}",
             "config": {"name": "old", "reduction": "sum_over_batch_size"}}
    restored = keras.saving.deserialize_keras_object(entry)
    assert type(restored).__name__ == class_name and restored.name == "old"
