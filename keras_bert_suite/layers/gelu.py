"""BERT's exact (erf) GELU, written the way the original BERT code writes it."""

import math

import keras
from keras import ops


def exact_gelu(x):
    """x · Φ(x) = 0.5 · x · (1 + erf(x / √2)), the GELU the released BERT checkpoints use.

    `ops.gelu(x, approximate=False)` is this formula on TensorFlow and a fused kernel on
    torch, so those keep it. On JAX it is written with erfc (more exact far in the negative
    tail, where x · Φ(x) is ~0 anyway), which cost ~25% more per call than erf.
    """
    if keras.backend.backend() != "jax":
        return ops.gelu(x, approximate=False)
    return 0.5 * x * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0))))
