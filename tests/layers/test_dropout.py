"""BertDropout: Keras' dropout semantics (rate, 1/keep scaling, fresh masks, identity at
inference) from the cheaper masks it draws on torch CPU and JAX, checked statistically."""

import keras
import numpy as np

from keras_bert_suite.layers import BertDropout
from tests.conftest import to_numpy
from tests.harness import check_config_round_trip

SHAPE = (64, 128, 256)  # 2M elements: the kept fraction's standard error is ~0.0002


def _mask(layer, x):
    return to_numpy(layer(x, training=True)) != 0


def test_drops_the_rate_scales_the_rest_and_draws_new_masks():
    layer, x = BertDropout(0.1), np.ones(SHAPE, "float32")
    y = to_numpy(layer(x, training=True))
    kept = y != 0
    assert abs(kept.mean() - 0.9) < 0.002
    np.testing.assert_allclose(y[kept], 1 / 0.9, rtol=1e-6)
    # A second call draws a new mask: two independent masks differ on 2 * 0.1 * 0.9 = 18%.
    assert abs((kept != _mask(layer, x)).mean() - 0.18) < 0.003
    np.testing.assert_array_equal(to_numpy(layer(x, training=False)), x)


def test_neighbouring_elements_are_dropped_independently():
    # On JAX two neighbours share one 32-bit random word (a 16-bit half each).
    dropped = ~_mask(BertDropout(0.3), np.ones(SHAPE, "float32")).reshape(-1)
    both = (dropped[0::2] & dropped[1::2]).mean()
    assert abs(both - 0.3 * 0.3) < 0.002


def test_no_dropout_at_rate_zero():
    x = np.random.default_rng(0).normal(size=(4, 8)).astype("float32")
    np.testing.assert_array_equal(to_numpy(BertDropout(0.0)(x, training=True)), x)


def test_config_round_trip_and_a_saved_model_keep_the_layer(tmp_path):
    layer = BertDropout(0.25, seed=7, name="dropout")
    restored = check_config_round_trip(layer)
    assert (restored.rate, restored.seed, restored.name) == (0.25, 7, "dropout")

    inputs = keras.Input((8,))
    model = keras.Model(inputs, BertDropout(0.25, name="dropout")(inputs))
    path = str(tmp_path / "dropout.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path).get_layer("dropout")
    assert isinstance(reloaded, BertDropout) and reloaded.rate == 0.25
    x = np.ones((4, 8), "float32")
    np.testing.assert_array_equal(to_numpy(reloaded(x, training=False)), x)
