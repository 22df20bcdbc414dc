"""BertInitializer: BERT's truncated normal (cut at two standard deviations) on every
backend, reproducible, serializable, and what every weight of a fresh encoder starts from."""

import keras
import numpy as np

from keras_bert_suite import BertEncoder
from keras_bert_suite.layers import BertInitializer
from tests.conftest import to_numpy
from tests.harness import check_config_round_trip

# A normal truncated at +-2 sigma keeps 95.45% of the mass; its standard deviation is
# sqrt(1 - 2 * 2 * phi(2) / 0.9545) = 0.8796 of the untruncated one.
TRUNCATED_STD = 0.8796


def test_values_are_a_normal_truncated_at_two_standard_deviations():
    initializer = BertInitializer(stddev=0.02, seed=3)
    restored = check_config_round_trip(initializer)
    values = np.asarray(to_numpy(keras.Variable(initializer((512, 384)))))
    assert values.dtype == np.float32 and values.shape == (512, 384)
    assert np.abs(values).max() < 0.04
    np.testing.assert_allclose(values.std(), 0.02 * TRUNCATED_STD, rtol=0.01)
    assert abs(values.mean()) < 0.02 * 0.01
    # 13.6% of a normal lies between 1 and 2 sigma on either side: truncated, not clipped
    # (clipping would pile values up at the bound).
    in_tail = np.mean(np.abs(values) > 0.02)
    np.testing.assert_allclose(in_tail, (0.9545 - 0.6827) / 0.9545, rtol=0.05)
    # 0.6% of the mass lies within 0.05 sigma of the cut; clipping would put 4.6% more there.
    assert np.mean(np.abs(values) > 0.039) < 0.01
    np.testing.assert_array_equal(to_numpy(restored((512, 384))), values)  # same seed


def test_unseeded_draws_follow_keras_set_random_seed():
    keras.utils.set_random_seed(7)
    first = BertInitializer()((64, 8))
    keras.utils.set_random_seed(7)
    np.testing.assert_array_equal(BertInitializer()((64, 8)), first)
    assert not np.array_equal(BertInitializer()((64, 8)), first)


def test_a_fresh_encoder_starts_from_it():
    encoder = BertEncoder(vocabulary_size=1000, num_layers=1, num_heads=2, hidden_dim=64,
                          intermediate_dim=128, initializer_range=0.05)
    kernels = {name: to_numpy(value) for name, value in encoder.weight_map().items()
               if name.endswith(("kernel", "embeddings"))}
    assert kernels
    for name, value in kernels.items():
        assert np.abs(value).max() < 0.1, name
    everything = np.concatenate([value.ravel() for value in kernels.values()])
    np.testing.assert_allclose(everything.std(), 0.05 * TRUNCATED_STD, rtol=0.02)
