"""ModernBERT's block (Warner et al. 2024, "Smarter, Better, Faster, Longer"), once for training
and serving. Pre-LayerNorm, no biases, rotary attention, GeGLU feed-forward:

    x = x + Dropout(Attention(LN_attention(x)))      LN_attention is the identity in layer 0
    x = x + W_o Dropout(GeGLU(W_i LN_feed_forward(x)))

after embeddings LN(token table[ids]); a final LN follows the last block. Every
`global_every`-th layer (0, 3, 6, ... for 3) attends globally with rotary theta 160,000; the
others attend within |i - j| <= local_attention // 2 with theta 10,000.

`parts` gives the sublayers by module name: Keras layers in training, TensorFlow forms in the
serving graph:

    parts.attention(x)            rotary self-attention (`rotary_attention` with the layer's
                                  angles and its masked or windowed attention)
    parts.dense(module, x)        "feed_forward_input" (W_i, H -> 2 I), "feed_forward_output"
    parts.norm(module, x)         "attention_norm", "feed_forward_norm"
    parts.activation(x)           the GELU of `hidden_activation`
    parts.dropout(name, x)        "attention_dropout", "feed_forward_dropout"
"""

from keras import ops

from keras_bert_suite.layers.geglu import geglu
from keras_bert_suite.layers.rotary import rotate

# Rotary theta of global and local layers (the released checkpoints' `global_rope_theta`,
# `local_rope_theta`; transformers 5's `rope_parameters[kind]["rope_theta"]`).
ROPE_THETA = {"global": 160_000.0, "local": 10_000.0}


def attention_kind(layer_index, global_every=3):
    """"global" on every `global_every`-th layer counting from layer 0, else "local"."""
    return "local" if layer_index % global_every else "global"


def block(x, parts, layer_index, ops=ops):
    """Block `layer_index` of the encoder on x [.., H]; `ops`: the parts' ops module."""
    normed = x if layer_index == 0 else parts.norm("attention_norm", x)
    x = x + parts.dropout("attention_dropout", parts.attention(normed))
    hidden = feed_forward_hidden(parts.norm("feed_forward_norm", x), parts, ops)
    return x + parts.dense("feed_forward_output", parts.dropout("feed_forward_dropout", hidden))


def feed_forward_hidden(x, parts, ops=ops):
    """GeGLU(x W_i) [.., I]: the feed-forward units' activations (what pruning scores)."""
    return geglu(parts.dense("feed_forward_input", x), parts.activation, ops)


def rotary_attention(qkv, cos, sin, attend, num_heads, ops=ops):
    """The context [B, T, N Dh] of ModernBERT's attention from `qkv` = x W_qkv [B, T, 3 N Dh]
    (query | key | value, each N heads of Dh): rotary angles (cos, sin [.., T, Dh], see
    `rotary.rotary_angles`) turn query and key, then `attend(query, key, value)` [B, T, N, Dh]
    (`sliding_window.masked_attention` or `windowed_attention`, scale 1 / sqrt(Dh))."""
    batch, length = ops.shape(qkv)[0], ops.shape(qkv)[1]
    head_dim = qkv.shape[-1] // (3 * num_heads)
    qkv = ops.reshape(qkv, (batch, length, 3, num_heads, head_dim))
    query, key, value = (ops.squeeze(part, axis=2) for part in ops.split(qkv, 3, axis=2))
    context = attend(rotate(query, cos, sin, ops), rotate(key, cos, sin, ops), value)
    return ops.reshape(context, (batch, length, num_heads * head_dim))
