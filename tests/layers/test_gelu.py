"""exact_gelu: BERT's erf GELU on every backend, whichever route the backend takes."""

import math

import numpy as np

from keras_bert_suite.layers.gelu import exact_gelu
from tests.conftest import to_numpy


def test_exact_gelu_is_x_times_the_normal_cdf():
    x = np.linspace(-8.0, 8.0, 1001, dtype="float32")
    expected = 0.5 * x.astype("float64") * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    np.testing.assert_allclose(to_numpy(exact_gelu(x)), expected, rtol=1e-5, atol=1e-6)
