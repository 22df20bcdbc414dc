"""The backend-specific fast paths of the modelling code, and the only module that has any.

Layers, heads and losses are written with `keras.ops` and give the same numbers on
TensorFlow, JAX and PyTorch. Where one backend runs a measurably faster route to the same
result, that route lives here, with the reason and the measurement in its docstring.

Every function returns its result by the current backend's faster route, or None where
the caller's portable form (Keras' own layer, or the formula written with `keras.ops`) is
already the fastest one; the caller then computes that form itself. The torch and JAX
imports are inside the functions, so importing this module never loads another backend.
"""

import keras
from keras import ops

# A 16-bit uniform compared with round(rate * 2^16): the kept fraction is off from
# 1 - rate by less than 2^-17 (0.100006 for rate 0.1), far below dropout's own noise.
_HALF_WORD = 2**16


def dropout(inputs, rate, seed, seed_generator):
    """`inputs` with a fresh dropout mask (keep 1 - rate, scaled by 1 / (1 - rate)), or None.

    For 0 < rate < 1, no noise_shape, training only (the caller checks); None means Keras'
    own `Dropout` is the faster route (TensorFlow, torch on CUDA, a seeded torch layer).
    * torch, CPU tensors, no seed: Keras calls F.dropout, whose CPU `bernoulli_` mask took
      ~10% of a BERT-mini pretraining step; a uniform draw compared with the rate gives
      the same masks' distribution at about half the cost (both use torch's global
      generator). On CUDA F.dropout's fused kernel is the faster one and stays.
    * JAX: Keras draws one 32-bit threefry word per element; two 16-bit halves of each
      word serve two elements, which halves the random-number work (fwd + bwd of a
      [32, 4, 128, 128] dropout 17 -> 9 ms on CPU). `seed_generator` is the layer's, the
      same one Keras' Dropout draws from.
    """
    backend = keras.backend.backend()
    if backend == "torch" and seed is None and inputs.device.type == "cpu":
        return _torch_cpu_dropout(inputs, rate)
    if backend == "jax":
        return _jax_dropout(inputs, rate, seed_generator)
    return None


def _torch_cpu_dropout(inputs, rate):
    import torch

    # Drawn in float32 (a bf16 uniform has too few levels for an exact rate), then in
    # place: the draw becomes the 0 / (1 / keep) mask without another copy.
    uniform = torch.rand(inputs.shape, device=inputs.device)
    scaled_mask = uniform.ge_(rate).to(inputs.dtype).mul_(1.0 / (1.0 - rate))
    return inputs * scaled_mask


def _jax_dropout(inputs, rate, seed_generator):
    import jax
    import jax.numpy as jnp

    # Pairs along the last axis only, so the leading axes (the batch, which a
    # keras.distribution shards) keep their layout.
    *leading, last = inputs.shape
    words = jax.random.bits(seed_generator.next(), (*leading, (last + 1) // 2), jnp.uint32)
    halves = jax.lax.bitcast_convert_type(words, jnp.uint16)  # [..., ceil(last/2), 2]
    halves = halves.reshape(*leading, -1)[..., :last]
    keep = halves >= jnp.uint16(round(rate * _HALF_WORD))
    return jnp.where(keep, inputs * (1.0 / (1.0 - rate)), jnp.zeros_like(inputs))


def exact_gelu(x):
    """The exact (erf) GELU of `x` by the backend's fused kernel, or None.

    On torch `ops.gelu(x, approximate=False)` is one fused kernel, so torch keeps it. On
    TensorFlow and JAX Keras writes it with erfc (more exact far in the negative tail,
    where x · Φ(x) is ~0 anyway), which cost 25-50% more per call (forward + backward of a
    [4096, 1024] tensor on CPU, with and without XLA) than the caller's erf form: None.
    """
    if keras.backend.backend() == "torch":
        return ops.gelu(x, approximate=False)
    return None


def sparse_cross_entropy(labels, logits):
    """Per-prediction cross-entropy, labels [B, P] ids, logits [B, P, V] -> [B, P], or None.

    The same numbers as `keras.losses.sparse_categorical_crossentropy(from_logits=True)`,
    by the fastest route per backend (measured on a 30k vocabulary, forward + backward):
    TensorFlow's fused op as Keras calls it; torch's F.cross_entropy on [B·P, V], since
    Keras moves the class axis of a 3-D input to position 1, which copies the logits and
    runs the softmax over a strided axis. None on JAX: the caller's logsumexp minus the
    label's logit, since Keras' one-hot product there took 2.6x as long.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    if backend == "torch":
        cross_entropy = keras.losses.sparse_categorical_crossentropy(
            ops.reshape(labels, (-1,)), ops.reshape(logits, (-1, ops.shape(logits)[-1])),
            from_logits=True)
        return ops.reshape(cross_entropy, ops.shape(labels))
    return None

