"""Attention within a window of keys (ModernBERT's local layers: Beltagy et al. 2020,
"Longformer"), written once over an ops module, in two forms with the same numbers:

* `masked_attention` with `local_keep`: every query scores every key and a band mask hides the
  far ones; cost grows with T² (what transformers computes; global layers use the same
  function with the padding mask alone).
* `windowed_attention`: queries in blocks of C = radius rows, each scoring only the 3 C keys of
  its block and the two around it; cost grows with T · 3 C, so an 8,192-token input costs 43x
  less than T² at ModernBERT's radius of 64.

A query i sees key j when |i - j| <= radius (ModernBERT: radius = local_attention // 2) and j is
a real token.
"""

import math

from keras import ops

from keras_bert_suite.layers.masked_softmax import masked_softmax


def band(length, radius, ops=ops):
    """[T, T] bool: |i - j| <= radius."""
    positions = ops.arange(length)
    return ops.abs(positions[:, None] - positions[None, :]) <= radius


def local_keep(padding_mask, radius, ops=ops):
    """[B, 1, T, T] bool: key j is a real token (padding_mask [B, T], 1 = token) within
    `radius` of query i."""
    keys = ops.cast(padding_mask, "bool")[:, None, None, :]  # [B, 1, 1, T]
    return ops.logical_and(keys, band(ops.shape(padding_mask)[1], radius, ops)[None, None])


def masked_attention(query, key, value, keep, ops=ops, dtype="float32", dropout=None):
    """Scaled dot-product attention: query [B, Q, N, Dh], key and value [B, T, N, Dh], `keep`
    bool broadcast to [B, N, Q, T] ([B, 1, 1, T] for padding alone) -> context [B, Q, N, Dh].
    Softmax in float32; `dtype`: the probabilities' after it; `dropout(probabilities)`."""
    scores = ops.einsum("bqnd,btnd->bnqt", query, key)  # [B, N, Q, T]
    scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(query.shape[-1]))
    probs = ops.cast(masked_softmax(scores, keep, ops), dtype)
    if dropout is not None:
        probs = dropout(probs)
    return ops.einsum("bnqt,btnd->bqnd", probs, value)  # [B, Q, N, Dh]


def windowed_attention(query, key, value, padding_mask, radius, ops=ops, dtype="float32",
                       dropout=None):
    """`masked_attention` under `local_keep(padding_mask, radius)`, at a cost linear in T:
    query, key, value [B, T, N, Dh], padding_mask [B, T] (1 = token) -> context [B, T, N, Dh].

    T is padded up to nb blocks of C = max(radius, 1) rows; query block c (rows c C ..
    c C + C - 1) scores the keys of blocks c - 1, c and c + 1, which hold every key within
    `radius` of its rows (one empty block is padded before the first and after the last)."""
    block = max(radius, 1)
    batch, length = ops.shape(query)[0], ops.shape(query)[1]
    heads, head_dim = query.shape[2], query.shape[3]
    blocks = (length + block - 1) // block
    tail = blocks * block - length

    def blocked(x, before, after):  # [B, T, ...] -> [B, nb (+ 2), C, ...], zero-padded
        pad = [[0, 0], [before, after]] + [[0, 0]] * (len(x.shape) - 2)
        return ops.reshape(ops.pad(x, pad), (batch, -1, block) + tuple(x.shape[2:]))

    def windows(x):  # [B, nb + 2, C, ...] -> [B, nb, 3 C, ...]: blocks c - 1, c, c + 1
        return ops.concatenate([x[:, :-2], x[:, 1:-1], x[:, 2:]], axis=2)

    queries = blocked(query, 0, tail)  # [B, nb, C, N, Dh]
    keys = windows(blocked(key, block, tail + block))  # [B, nb, 3C, N, Dh]
    values = windows(blocked(value, block, tail + block))  # [B, nb, 3C, N, Dh]
    real_keys = ops.cast(padding_mask, "int32")
    real_keys = windows(blocked(real_keys, block, tail + block))  # [B, nb, 3C]

    # Query row q of a block is token c C + q; key k of its window is token (c - 1) C + k.
    distance = ops.arange(block)[:, None] + block - ops.arange(3 * block)[None, :]  # [C, 3C]
    keep = ops.logical_and(ops.abs(distance) <= radius,
                           ops.cast(real_keys, "bool")[:, :, None, None, :])  # [B, nb, 1, C, 3C]

    scores = ops.einsum("bcqnd,bcknd->bcnqk", queries, keys)  # [B, nb, N, C, 3C]
    scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(head_dim))
    probs = ops.cast(masked_softmax(scores, keep, ops), dtype)
    if dropout is not None:
        probs = dropout(probs)
    context = ops.einsum("bcnqk,bcknd->bcqnd", probs, values)  # [B, nb, C, N, Dh]
    return ops.reshape(context, (batch, -1, heads, head_dim))[:, :length]
