"""BERT's exact (erf) GELU, written the way the original BERT code writes it."""

import math

from keras import ops

from keras_bert_suite import backend_kernels


def exact_gelu(x):
    """x · Φ(x) = 0.5 · x · (1 + erf(x / √2)), the GELU the released BERT checkpoints use.

    Where a backend has a faster fused kernel for the same function (torch), that one runs;
    see `backend_kernels.exact_gelu` for why TensorFlow and JAX keep this erf form.
    """
    fused = backend_kernels.exact_gelu(x)
    if fused is not None:
        return fused
    return 0.5 * x * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0))))
