"""FusedAdamW takes Keras AdamW's steps, in BERT's set-up (warm-up then linear decay,
LayerNorm and biases kept out of the decay, global-norm clipping that acts), on the real
gradients of a tiny classifier fitted to real sentences."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertClassifier, BertEncoder, BertPreprocessor, BertTokenizer
from keras_bert_suite.training import create_optimizer
from keras_bert_suite.training.optimizers import AdamW, FusedAdamW
from tests.conftest import alternating_reviews, to_numpy

PRESET = "bert_uncased_L-2_H-128_A-2"  # the real uncased vocabulary
STEPS = 10
# Both run in float32 and round in other places (one fused kernel against Keras' chain of
# ops): a few units in the last place of a weight, ~1e-7. The atol covers weights that pass
# near 0 (the head's zero-initialized bias): their error is set by the step (~1e-3), not by
# their value.
RTOL, ATOL = 1e-6, 1e-9


# JAX's eager fit takes ~25 s here: it runs jitted, and hands the gradients out by callback.
EAGER = keras.backend.backend() != "jax"


class RecordingAdamW(AdamW):
    """Keras' AdamW that keeps every step's gradients."""

    recorded = None

    def apply(self, grads, trainable_variables=None):
        if self.recorded is None:
            self.recorded = []

        def record(*values):
            self.recorded.append([np.asarray(value) for value in values])

        if EAGER:
            record(*(to_numpy(keras.ops.convert_to_tensor(g)) for g in grads))
        else:
            import jax

            jax.debug.callback(record, *grads, ordered=True)
        return super().apply(grads, trainable_variables)


def _bert_setup(optimizer_class):
    # The tiny model's gradient norm is ~0.5: 0.05 clips every step.
    bert = create_optimizer(learning_rate=1e-3, num_train_steps=STEPS, num_warmup_steps=2,
                            global_clipnorm=0.05)
    return optimizer_class.from_config(bert.get_config())


def _classifier(x, weights=None):
    encoder = BertEncoder(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=32, dropout=0.0)
    classifier = BertClassifier(encoder, num_classes=2, dropout=0.0)
    if weights is not None:
        classifier.set_weights(weights)
    return classifier


def _trained(classifier):
    return {v.path: to_numpy(v) for v in classifier.trainable_variables}


@pytest.fixture(scope="module")
def keras_run():
    """(x, y, initial weights, Keras AdamW's 10 steps' gradients, its trained weights)."""
    texts, y = alternating_reviews(4)
    preprocessor = BertPreprocessor(BertTokenizer.from_preset(PRESET), sequence_length=24)
    x = {name: to_numpy(value) for name, value in preprocessor(texts).items()}
    classifier = _classifier(x)
    initial = classifier.get_weights()
    classifier.compile(optimizer=_bert_setup(RecordingAdamW), run_eagerly=EAGER)
    classifier.fit(x, y, batch_size=len(y), epochs=STEPS, shuffle=False, verbose=0)
    assert len(classifier.optimizer.recorded) == STEPS
    return x, y, initial, classifier.optimizer.recorded, _trained(classifier)


def test_ten_steps_of_real_gradients_match_keras_adamw(keras_run):
    x, _, initial, gradients, expected = keras_run
    classifier = _classifier(x, initial)
    optimizer = _bert_setup(FusedAdamW)
    for step_gradients in gradients:
        optimizer.apply([keras.ops.convert_to_tensor(g) for g in step_gradients],
                        classifier.trainable_variables)
    actual = _trained(classifier)
    assert any(name.endswith("gamma") for name in actual)  # kept out of the decay
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=RTOL, atol=ATOL, err_msg=name)
    before = _trained(_classifier(x, initial))
    assert max(np.abs(expected[name] - before[name]).max() for name in before) > 1e-3


def test_compiled_fit_trains_as_keras_adamw(keras_run):
    """The step traced by fit (tf.function, jax.jit): the same weights up to the training's
    own amplification of rounding (Adam divides tiny gradients by their own scale)."""
    x, y, initial, _, expected = keras_run
    classifier = _classifier(x, initial)
    classifier.compile(optimizer=_bert_setup(FusedAdamW))
    classifier.fit(x, y, batch_size=len(y), epochs=STEPS, shuffle=False, verbose=0)
    assert type(classifier.optimizer) is FusedAdamW
    actual = _trained(classifier)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-3, atol=1e-5, err_msg=name)


def _row_gradients(step_ids, seed=0):
    """Gradients of a [50, 8] table as a lookup makes them: TensorFlow's row slices, one row
    per looked-up id, duplicates unsummed; a dense array with untouched rows 0 elsewhere."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((len(step_ids), 8)).astype("float32")
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.IndexedSlices(tf.constant(values), tf.constant(step_ids), (50, 8))
    dense = np.zeros((50, 8), "float32")
    np.add.at(dense, step_ids, values)
    return keras.ops.convert_to_tensor(dense)


def test_touched_rows_update_equals_the_dense_one_on_touched_rows():
    """Row-wise AdamW (table out of the decay, as the dense run has it too): while every step
    touches the same rows, every weight equals the dense update's (untouched rows get zero
    gradients and zero moments there); a step touching other rows leaves the first ones
    where they were, where the dense update still moves them by their moments."""
    rng = np.random.default_rng(0)
    initial = [rng.standard_normal((50, 8)).astype("float32"),
               rng.standard_normal((8, 4)).astype("float32")]
    runs = {}
    for rows in (None, ("table",)):
        table = keras.Variable(initial[0], name="table")
        kernel = keras.Variable(initial[1], name="kernel")
        optimizer = create_optimizer(
            learning_rate=1e-2, global_clipnorm=0.5, touched_rows_names=rows,
            exclude_from_weight_decay=("table",))
        for step in range(3):
            ids = [3, 7, 7, 20] if step < 2 else [1, 2]
            optimizer.apply([_row_gradients(ids, step),
                             keras.ops.convert_to_tensor(initial[1] * 0.1)], [table, kernel])
            if step == 1:
                runs[rows, "touched"] = [to_numpy(table), to_numpy(kernel)]
        runs[rows, "end"] = to_numpy(table)
        assert optimizer.updates_touched_rows(table) is bool(rows)
    for dense, lazy in zip(runs[None, "touched"], runs[("table",), "touched"]):
        np.testing.assert_allclose(lazy, dense, rtol=RTOL, atol=ATOL)
    assert not np.array_equal(runs[None, "touched"][0][3], initial[0][3])
    lazy_end, dense_end = runs[("table",), "end"], runs[None, "end"]
    np.testing.assert_array_equal(lazy_end[[3, 7, 20]], runs[("table",), "touched"][0][[3, 7, 20]])
    assert not np.allclose(dense_end[[3, 7, 20]], runs[None, "touched"][0][[3, 7, 20]])
    np.testing.assert_allclose(lazy_end[[1, 2]], dense_end[[1, 2]], rtol=1e-5)
    np.testing.assert_array_equal(lazy_end[0], initial[0][0])
