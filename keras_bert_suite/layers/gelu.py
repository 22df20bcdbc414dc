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
    return erf_gelu(x)


def erf_gelu(x, ops=ops):
    """The exact GELU's formula over `ops` (keras.ops here, `layers/serving/tf_ops` in the
    serving graph, which runs in any Keras backend's process)."""
    return 0.5 * x * (1.0 + ops.erf(x * (1.0 / math.sqrt(2.0))))


def tanh_gelu(x, ops=ops):
    """0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))): the approximation ALBERT's
    checkpoints were trained with (transformers' "gelu_new"), over `ops`."""
    return 0.5 * x * (1.0 + ops.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def tanh(x, ops=ops):
    return ops.tanh(x)


def relu(x, ops=ops):
    return ops.relu(x)


# The `activation` names of the encoder's feed-forward networks (transformers' `hidden_act`
# "gelu" and "gelu_new" are these two): in training (exact_gelu may take a fused kernel) and
# as formulas over an ops module (the serving graph's).
FEED_FORWARD_ACTIVATIONS = {"gelu": exact_gelu, "gelu_approximate": tanh_gelu}
FEED_FORWARD_FORMULAS = {"gelu": erf_gelu, "gelu_approximate": tanh_gelu}
# The pooler's `pooler_activation` (Keras' Dense computes "gelu" as the exact one).
POOLER_FORMULAS = {"tanh": tanh, "gelu": erf_gelu, "relu": relu}


def feed_forward_activation(name):
    """The GELU named `name` (a layer's `activation` argument), or a ValueError naming the
    choices."""
    if name not in FEED_FORWARD_ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(FEED_FORWARD_ACTIVATIONS)} (the "
                         f"encoder's), got {name!r}.")
    return FEED_FORWARD_ACTIVATIONS[name]
