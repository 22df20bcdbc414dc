"""The one tolerance rule for numeric comparisons in the tests.

`assert_close(actual, expected)` passes where |actual - expected| <= atol + rtol * |expected|
elementwise (numpy's assert_allclose). The bound scales with the values: a relative part for
the bulk, and a small absolute part only for values near 0, where a relative bound means
nothing. Never compare model outputs with an absolute bound alone: logits of |20| and
probabilities of 1e-4 need different absolute slack, so an absolute-only bound is either too
loose for the small values or too tight for the large ones on another CPU or backend.

Defaults are for float32 model outputs computed twice along the same path (same backend,
another batch shape / kernel / process): float32 has a 2**-24 ~ 6e-8 unit roundoff and a
BERT layer accumulates a few hundred of them, so rtol=1e-5 (~170 ULPs) leaves room for oneDNN
and XLA picking other kernels, while a real bug (a wrong layer-norm epsilon, a dropped
attention mask, a missing bias) moves outputs by 1e-3 relative or more. Comparisons across
implementations (ours vs transformers, eager vs a served graph) pass a looser rtol explicitly,
with a comment saying why.
"""

import keras
import numpy as np

RTOL = 1e-5  # float32, same computation path: ~170 ULPs of relative slack
ATOL = 1e-6  # only for values near 0 (|x| < atol / rtol = 0.1 are bounded by atol)


def _numpy(x):
    if isinstance(x, (np.ndarray, np.generic, float, int, list, tuple)):
        return np.asarray(x)
    return np.asarray(keras.ops.convert_to_numpy(x))


def assert_close(actual, expected, rtol=RTOL, atol=ATOL, err_msg=""):
    """Assert |actual - expected| <= atol + rtol * |expected| elementwise.

    `actual` and `expected` may be numpy arrays, Python numbers / lists or backend tensors
    (TensorFlow, JAX, PyTorch); shapes must match (broadcasting a scalar `expected` is allowed,
    e.g. `assert_close(norms, 1.0)`).
    """
    np.testing.assert_allclose(_numpy(actual), _numpy(expected), rtol=rtol, atol=atol,
                               err_msg=err_msg)
