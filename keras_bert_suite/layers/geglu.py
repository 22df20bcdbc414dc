"""The gated feed-forward unit of ModernBERT (GeGLU: Shazeer 2020, "GLU Variants Improve
Transformer"), written once over an ops module."""

from keras import ops


def geglu(projected, activation, ops=ops):
    """act(input) · gate [.., I] from `projected` = x W_i [.., 2 I], whose first half is the
    input and second half the gate (transformers' `Wi(x).chunk(2)`). These I products are the
    prunable units: removing one removes an input/gate column pair of W_i and a row of W_o.

    `activation(x)`: the GELU of the config's `hidden_activation` over the same ops (the
    exact erf form for "gelu", the tanh form for "gelu_pytorch_tanh" / "gelu_new")."""
    value, gate = ops.split(projected, 2, axis=-1)  # 2 x [.., I]
    return activation(value) * gate
