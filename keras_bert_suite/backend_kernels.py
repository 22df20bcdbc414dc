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
                 step, weight_decay, beta_1, beta_2, epsilon, row_wise=None):
    """Every variable's AdamW step at once (Keras AdamW's numbers; the decay only where
    `decayed[i]`; only the touched rows where `row_wise[i]`: `adamw_touched_rows`),
    assigned in place; True, or None on TensorFlow (`adamw_variable_update`).

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
    row_wise = tuple(row_wise or [False] * len(variables))
    hyper = dict(decayed=tuple(decayed), row_wise=row_wise, learning_rate=learning_rate, step=step,
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


def _torch_adamw(variables, gradients, momentums, velocities, *, decayed, row_wise,
                 learning_rate, step, weight_decay, beta_1, beta_2, epsilon):
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
        for variable, gradient, m, v, decay, rows in zip(variables, gradients, momentums,
                                                         velocities, decayed, row_wise):
            if rows:
                adamw_touched_rows(variable, gradient, m, v, learning_rate=lr, step=local_step,
                                   decay=weight_decay if decay else None, beta_1=beta_1,
                                   beta_2=beta_2, epsilon=epsilon)
                continue
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


def _jax_adamw(variables, gradients, momentums, velocities, *, decayed, row_wise, learning_rate,
               step, weight_decay, beta_1, beta_2, epsilon):
    update = _jax_adamw_function(decayed, row_wise, weight_decay, beta_1, beta_2, epsilon)
    values, ms, vs = update([v.value for v in variables], list(gradients),
                            [m.value for m in momentums], [v.value for v in velocities],
                            learning_rate, step)
    for keras_variables, new_values in ((variables, values), (momentums, ms),
                                        (velocities, vs)):
        for variable, value in zip(keras_variables, new_values):
            variable.assign(value)


@functools.lru_cache(maxsize=None)
def _jax_adamw_function(decayed, row_wise, weight_decay, beta_1, beta_2, epsilon):
    import jax
    import jax.numpy as jnp

    def update(values, gradients, ms, vs, learning_rate, step):
        new_values, new_ms, new_vs = [], [], []
        for value, gradient, m, v, decay, rows in zip(values, gradients, ms, vs, decayed,
                                                      row_wise):
            stepped = adam_rows(value, gradient, m, v, learning_rate=learning_rate, step=step,
                                decay=weight_decay if decay else None, beta_1=beta_1,
                                beta_2=beta_2, epsilon=epsilon)
            if rows:  # the touched rows' step, the others kept (one fused pass all the same)
                touched = jnp.any(gradient != 0, axis=1, keepdims=True)
                stepped = [jnp.where(touched, new, old) for new, old in zip(stepped, (value, m, v))]
            for new, out in zip(stepped, (new_values, new_ms, new_vs)):
                out.append(new)
        return new_values, new_ms, new_vs

    return jax.jit(update)


def global_norm(gradients):
    """The L2 norm of all `gradients` together (Keras' `global_norm`), or None.

    Keras squares each gradient (a pass that writes a copy) and then sums it (a pass that
    reads it). TensorFlow's `l2_loss` and torch's `_foreach_norm` reduce each gradient in
    one read. TensorFlow row slices (`tf.IndexedSlices`, ids unique: see
    `training.optimizers`) count their rows' values. None on JAX, where XLA fuses Keras' form.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        halves = [tf.nn.l2_loss(g.values if isinstance(g, tf.IndexedSlices) else g)
                  for g in gradients if g is not None]
        return tf.sqrt(2.0 * tf.add_n(halves))
    if backend == "torch":
        import torch

        norms = torch._foreach_norm([g for g in gradients if g is not None])
        return torch.linalg.vector_norm(torch.stack(norms))
    return None


def adam_rows(value, gradient, m, v, *, learning_rate, step, decay, beta_1, beta_2, epsilon):
    """Keras AdamW's step on some rows of a variable, written with `keras.ops` on native
    tensors: (new value, new m, new v) of the rows given (`adamw_touched_rows`; JAX's jitted
    update runs it on whole variables)."""
    dtype = value.dtype
    lr = ops.cast(learning_rate, dtype)
    t = ops.cast(step, dtype)
    if decay:  # Keras: variable - variable * decay * lr
        value = value - value * ops.cast(decay, dtype) * lr
    gradient = ops.cast(gradient, dtype)
    alpha = (lr * ops.sqrt(1 - ops.power(ops.cast(beta_2, dtype), t))
             / (1 - ops.power(ops.cast(beta_1, dtype), t)))
    m = m + (gradient - m) * (1 - beta_1)
    v = v + (ops.square(gradient) - v) * (1 - beta_2)
    return value - (m * alpha) / (ops.sqrt(v) + epsilon), m, v


def adamw_touched_rows(variable, gradient, momentum, velocity, **hyper):
    """AdamW on the rows of a 2-D table that this step's gradient touches (a lazy update:
    the other rows, their moments and their decay wait for a step that looks them up).

    TensorFlow: `gradient` is a `tf.IndexedSlices` with unique ids; the rows are gathered,
    stepped and scattered back. torch: the rows whose dense gradient is not all zero. JAX
    (`_jax_adamw`) masks inside its jitted update instead (static shapes). `variable`,
    `momentum`, `velocity`: tf.Variables on TensorFlow, Keras variables on torch.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        ids, rows = gradient.indices, gradient.values
        new = adam_rows(tf.gather(variable, ids), rows, tf.gather(momentum, ids),
                        tf.gather(velocity, ids), **hyper)
        for target, values in zip((variable, momentum, velocity), new):
            target.scatter_update(tf.IndexedSlices(values, ids))
        return None
    import torch

    with torch.no_grad():
        table = variable.value
        ids = torch.nonzero(gradient.ne(0).any(dim=1)).squeeze(1)
        new = adam_rows(table[ids], gradient[ids], momentum.value[ids], velocity.value[ids],
                        **hyper)
        for target, values in zip((table, momentum.value, velocity.value), new):
            target.index_copy_(0, ids, values.to(target.dtype))
    return None


def is_row_slices(gradient):
    """Whether `gradient` is TensorFlow's row slices of a table (`tf.IndexedSlices`)."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf

    return isinstance(gradient, tf.IndexedSlices)
