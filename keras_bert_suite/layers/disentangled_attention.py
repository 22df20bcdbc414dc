"""DeBERTa's disentangled attention (He et al. 2021, "DeBERTa", section 3.1; v3's settings:
shared key/query projections for the relative embeddings, a LayerNorm on them, both
position terms), written once over an ops module.

    score(i, j) = ( q_i · k_j                     content to content
                  + q_i · k^r_{δ(i, j)}           content to position ("c2p")
                  + k_j · q^r_{δ(j, i)} )         position to content ("p2c")
                  / sqrt(Dh · 3)

q, k: the tokens' query and key projections; q^r, k^r: the same projections (weights and
biases: `share_att_key`) of the normalized relative embeddings; δ(i, j): the row of distance
i - j (`relative_positions.relative_indices`). The block around it is BERT's post-LayerNorm
block; the embeddings have no position rows.
"""

import math

from keras import ops

from keras_bert_suite.layers.layer_norm import layer_norm
from keras_bert_suite.layers.masked_softmax import masked_softmax


def relative_embeddings(table, scale, offset, epsilon, ops=ops):
    """The relative embeddings [2 S, H] every layer projects: LayerNorm(table) (`norm_rel_ebd`
    "layer_norm", the encoder's one norm with eps `layer_norm_eps`)."""
    return layer_norm(table, scale, offset, epsilon, ops)


def disentangled_scores(query, key, position_query, position_key, indices, ops=ops):
    """Scaled scores [B, N, T, T] float32 from query, key [B, T, N, Dh] and the relative
    embeddings' projections position_query, position_key [2 S, N, Dh] (None leaves the p2c or
    c2p term out, as `pos_att_type` may); indices [T, T] from `relative_indices`."""
    terms = 1 + (position_key is not None) + (position_query is not None)
    scale = 1.0 / math.sqrt(query.shape[-1] * terms)
    # Each term in float32 before the sum, so bf16 policies lose nothing there.
    scores = ops.cast(ops.einsum("bqnd,bknd->bnqk", query, key), "float32")  # [B, N, T, T]
    if position_key is not None:
        by_row = ops.einsum("bqnd,rnd->bnqr", query, position_key)  # [B, N, T, 2S]
        by_pair = ops.take_along_axis(by_row, indices[None, None], axis=-1)  # [B, N, T, T]
        scores = scores + ops.cast(by_pair, "float32")
    if position_query is not None:
        by_row = ops.einsum("bknd,rnd->bnkr", key, position_query)  # [B, N, T, 2S]
        # Key j reads the row of distance j - i: the transposed indices, then back to [.., i, j].
        by_pair = ops.take_along_axis(by_row, ops.transpose(indices)[None, None], axis=-1)
        scores = scores + ops.cast(ops.transpose(by_pair, (0, 1, 3, 2)), "float32")
    return scores * scale


def disentangled_attention(query, key, value, position_query, position_key, indices, keep,
                           ops=ops, dtype="float32", dropout=None):
    """The context [B, T, N, Dh] under `disentangled_scores`; `keep` bool broadcast to
    [B, N, T, T] ([B, 1, 1, T] for padding); softmax in float32, probabilities in `dtype`,
    then `dropout(probabilities)` while training."""
    scores = disentangled_scores(query, key, position_query, position_key, indices, ops)
    probs = ops.cast(masked_softmax(scores, keep, ops), dtype)
    if dropout is not None:
        probs = dropout(probs)
    return ops.einsum("bnqk,bknd->bqnd", probs, value)  # [B, T, N, Dh]
