"""The backend-specific fast paths of the modelling code, and the only module that has any.

Layers, heads, losses and the optimizer's update are written with `keras.ops` and give the
same numbers on TensorFlow, JAX and PyTorch. Where one backend runs a measurably faster route to the same
result, that route lives here, with the reason and the measurement in its docstring.

Every function returns its result by the current backend's faster route, or None where
the caller's portable form (Keras' own layer, or the formula written with `keras.ops`) is
already the fastest one; the caller then computes that form itself. The torch and JAX
imports are inside the functions, so importing this module never loads another backend.
"""

import functools

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



def adamw_variable_update(variable, gradient, momentum, velocity, *, learning_rate, step,
                          decay, beta_1, beta_2, epsilon):
    """One variable's AdamW step (decoupled decay `variable -= lr · decay · variable`, then
    Adam) with Keras AdamW's numbers, on TensorFlow; None elsewhere (see `adamw_update`).

    Keras writes the step as ~15 element-wise ops, each a pass over the variable (TensorFlow
    without XLA runs each on its own): ~40 passes over all 22.7M weights of MiniLM per step.
    TensorFlow's ResourceApplyAdam is one pass (the same formula, in place), the decay one
    more. `variable`, `momentum` and `velocity` are tf.Variables (a replica's, under a
    tf.distribute strategy), `step` the 1-based update count.
    """
    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf

    dtype = variable.dtype
    lr = tf.cast(learning_rate, dtype)
    step = tf.cast(step, dtype)
    if decay:
        variable.assign_sub(variable * (tf.cast(decay, dtype) * lr))
    lr_scale, epsilon_scale = _keras_moment_rounding(beta_1, beta_2)
    return tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=momentum.handle, v=velocity.handle,
        beta1_power=tf.pow(tf.cast(beta_1, dtype), step),
        beta2_power=tf.pow(tf.cast(beta_2, dtype), step),
        lr=lr * lr_scale, beta1=tf.cast(beta_1, dtype), beta2=tf.cast(beta_2, dtype),
        epsilon=tf.cast(epsilon * epsilon_scale, dtype), grad=tf.cast(gradient, dtype))


def _keras_moment_rounding(beta_1, beta_2):
    """(learning-rate, epsilon) factors that give ResourceApplyAdam Keras' step.

    The kernel blends the moments by `1 - beta` computed in float32 (1 - 0.999f =
    0.000999987), Keras by `1 - beta` rounded once (0.001f): the second moment comes out
    1.3e-5 smaller, which moves the step by 6e-6. Moments scaled by c_tf / c_keras give
    the step lr · (c1_tf / c1) / sqrt(c2_tf / c2) · m / (sqrt(v) + eps / sqrt(c2_tf / c2)).
    """
    import numpy as np

    def ratio(beta):  # c_tf / c_keras
        return float(np.float32(1) - np.float32(beta)) / float(np.float32(1 - beta))

    return float(np.sqrt(ratio(beta_2)) / ratio(beta_1)), float(np.sqrt(ratio(beta_2)))


def adamw_update(variables, gradients, momentums, velocities, *, decayed, learning_rate,
                 step, weight_decay, beta_1, beta_2, epsilon):
    """Every variable's AdamW step at once (Keras AdamW's numbers; the decay only where
    `decayed[i]`), assigned in place; True, or None on TensorFlow (`adamw_variable_update`).

    * torch: `torch._fused_adamw_`, the kernel of `torch.optim.AdamW(fused=True)`: one pass
      per variable for decay and update, where Keras' per-variable ops made ~15 (measured
      in docs/benchmarks.md). Torch adds epsilon after the bias correction and corrects in
      float64; its learning rate, epsilon and decay are set so that the step is Keras'.
    * JAX: Keras' formula over all variables as one jitted function: Keras' jitted train
      step fuses it the same way; an eager `apply` becomes one compiled call.
    """
    backend = keras.backend.backend()
    arguments = (variables, gradients, momentums, velocities)
    learning_rate = ops.convert_to_tensor(learning_rate)  # Keras holds a constant one in a Variable
    hyper = dict(decayed=tuple(decayed), learning_rate=learning_rate, step=step,
                 weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon)
    if backend == "torch":
        _torch_adamw(*arguments, **hyper)
        return True
    if backend == "jax":
        _jax_adamw(*arguments, **hyper)
        return True
    return None


def torch_has_fused_adamw():
    import torch

    return hasattr(torch, "_fused_adamw_")


def _torch_adamw(variables, gradients, momentums, velocities, *, decayed, learning_rate,
                 step, weight_decay, beta_1, beta_2, epsilon):
    import math

    import torch

    # Keras' step: lr · sqrt(1 - b2^t) / (1 - b1^t) · m / (sqrt(v) + eps), the powers in
    # float32. Torch's: (lr' / bc1) · m / (sqrt(v) / sqrt(bc2) + eps'), bc = 1 - b^t in
    # float64, decay by lr' · decay'.
    # float32 pow with a tensor exponent, as Keras takes it: 1 - b2^t cancels, so its
    # rounding moves the step by up to 1e-5 at small t.
    lr = ops.cast(learning_rate, "float32")
    local_step = ops.cast(step, "float32")
    beta_1_power = ops.power(ops.cast(beta_1, "float32"), local_step)
    beta_2_power = ops.power(ops.cast(beta_2, "float32"), local_step)
    keras_alpha = float(lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power))
    t = float(local_step)
    bias_1, bias_2_root = 1 - beta_1 ** t, math.sqrt(1 - beta_2 ** t)
    fused_lr = keras_alpha * bias_1 / bias_2_root
    groups = {}
    with torch.no_grad():
        for variable, gradient, m, v, decay in zip(variables, gradients, momentums,
                                                   velocities, decayed):
            value = variable.value
            key = (value.device, value.dtype, bool(decay and weight_decay))
            group = groups.setdefault(key, ([], [], [], []))
            for tensors, tensor in zip(group, (value, gradient, m.value, v.value)):
                tensors.append(tensor)
        for (device, _, decays), (params, grads, ms, vs) in groups.items():
            steps = [torch.tensor(t, device=device)] * len(params)
            torch._fused_adamw_(
                params, [g.to(p.dtype) for g, p in zip(grads, params)], ms, vs, [], steps,
                lr=fused_lr, beta1=beta_1, beta2=beta_2,
                weight_decay=float(lr) * weight_decay / fused_lr if decays and fused_lr else 0.0,
                eps=epsilon / bias_2_root, amsgrad=False, maximize=False)


def _jax_adamw(variables, gradients, momentums, velocities, *, decayed, learning_rate, step,
               weight_decay, beta_1, beta_2, epsilon):
    update = _jax_adamw_function(decayed, weight_decay, beta_1, beta_2, epsilon)
    values, ms, vs = update([v.value for v in variables], list(gradients),
                            [m.value for m in momentums], [v.value for v in velocities],
                            learning_rate, step)
    for keras_variables, new_values in ((variables, values), (momentums, ms),
                                        (velocities, vs)):
        for variable, value in zip(keras_variables, new_values):
            variable.assign(value)


@functools.lru_cache(maxsize=None)
def _jax_adamw_function(decayed, weight_decay, beta_1, beta_2, epsilon):
    import jax
    import jax.numpy as jnp

    def update(values, gradients, ms, vs, learning_rate, step):
        new_values, new_ms, new_vs = [], [], []
        for value, gradient, m, v, decay in zip(values, gradients, ms, vs, decayed):
            dtype = value.dtype
            lr = jnp.asarray(learning_rate, dtype)
            t = jnp.asarray(step, dtype)
            if decay and weight_decay:  # Keras: variable - variable * decay * lr
                value = value - value * jnp.asarray(weight_decay, dtype) * lr
            gradient = gradient.astype(dtype)
            alpha = (lr * jnp.sqrt(1 - jnp.power(jnp.asarray(beta_2, dtype), t))
                     / (1 - jnp.power(jnp.asarray(beta_1, dtype), t)))
            m = m + (gradient - m) * (1 - beta_1)
            v = v + (jnp.square(gradient) - v) * (1 - beta_2)
            new_values.append(value - (m * alpha) / (jnp.sqrt(v) + epsilon))
            new_ms.append(m)
            new_vs.append(v)
        return new_values, new_ms, new_vs

    return jax.jit(update)
