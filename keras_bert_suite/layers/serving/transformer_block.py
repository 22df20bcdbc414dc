"""The serving form of `TransformerBlock` (post-LayerNorm, no dropout)."""

from keras_bert_suite.layers.serving.activations import FEED_FORWARD
from keras_bert_suite.layers.serving.attention import self_attention
from keras_bert_suite.layers.serving.dense import dense, layer_norm


def transformer_block(x, read, num_heads, head_dim, activation, epsilon, bias, batch, length,
                      observe=None):
    """x [B T, H] -> [B T, H]: LN(x + Attention(x)), then LN(x + FFN(x)). `read`: the block's
    weights ("attention/qkv/kernel", ..., "output_layer_norm/beta"); `observe(name, x)` sees
    the inputs of the matmuls that int8_vnni calibration smooths."""
    if observe is not None:
        observe("attention/qkv/kernel", x)
    attention = self_attention(x, lambda name: read("attention/" + name), num_heads, head_dim,
                               bias, batch, length)
    x = layer_norm(x + attention, read, "attention_layer_norm", epsilon)
    if observe is not None:
        observe("intermediate/kernel", x)
    hidden = FEED_FORWARD[activation](dense(x, read, "intermediate/"))
    return layer_norm(x + dense(hidden, read, "output/"), read, "output_layer_norm", epsilon)
