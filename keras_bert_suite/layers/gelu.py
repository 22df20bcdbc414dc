"""GELU as the family computes it: BERT's exact (erf) form and ALBERT's tanh approximation."""

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
    return erf_gelu(x, ops.erf)


def erf_gelu(x, erf):
    """The exact GELU's formula with the `erf` of x's library (keras.ops here, TensorFlow's in
    the serving graph, which runs in any Keras backend's process)."""
    return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))


def tanh_gelu(x, tanh=ops.tanh):
    """0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))): the approximation ALBERT's
    checkpoints were trained with (transformers' "gelu_new"); `tanh` of x's library."""
    return 0.5 * x * (1.0 + tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


# The `activation` names of the encoder's feed-forward networks (transformers' `hidden_act`
# "gelu" and "gelu_new" are these two).
FEED_FORWARD_ACTIVATIONS = {"gelu": exact_gelu, "gelu_approximate": tanh_gelu}


def feed_forward_activation(name):
    """The GELU named `name` (a layer's `activation` argument), or a ValueError naming the
    choices."""
    if name not in FEED_FORWARD_ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(FEED_FORWARD_ACTIVATIONS)} (the "
                         f"encoder's), got {name!r}.")
    return FEED_FORWARD_ACTIVATIONS[name]
