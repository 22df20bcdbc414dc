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
