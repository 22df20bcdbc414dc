"""Mixed precision: the global dtype policy and loss scaling where float16 needs it."""

import keras

MIXED_PRECISION_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def set_mixed_precision(policy="mixed_bfloat16"):
    """Sets Keras' global dtype policy; call it before building the model.

    "mixed_bfloat16" for TPUs and recent GPUs (no loss scaling needed: bf16 has float32's
    range), "mixed_float16" for older GPUs (wrap the optimizer with `loss_scaled`;
    `model.compile` also does it by itself for a mixed_float16 model; JAX has no float16
    matmul on CPU), "float32" to undo. Variables stay float32 under both mixed policies.
    """
    if policy not in MIXED_PRECISION_POLICIES:
        raise ValueError(
            f"Unknown precision policy '{policy}'; expected one of {MIXED_PRECISION_POLICIES}.")
    keras.config.set_dtype_policy(policy)
    return keras.dtype_policies.get(policy)


def loss_scaled(optimizer, policy=None):
    """Wraps `optimizer` in a dynamic `LossScaleOptimizer` when `policy` computes in float16.

    float16 gradients underflow without loss scaling; bfloat16 and float32 need none, so
    the optimizer comes back unchanged for them. `policy` defaults to the global policy.
    """
    policy = keras.dtype_policies.get(policy) if policy is not None else keras.config.dtype_policy()
    if policy.compute_dtype != "float16" or isinstance(
            optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer
    return keras.optimizers.LossScaleOptimizer(optimizer)
