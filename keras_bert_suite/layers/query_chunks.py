"""Global attention on a long input, a block of query rows at a time: the numbers of
`sliding_window.masked_attention` with one [B, N, C, T] block of scores alive instead of
[B, N, T, T]. At 8,192 tokens and 12 heads the full scores take 3.2 GB of float32 per layer
(and as much again for the probabilities); blocks of C = 1,024 rows take 400 MB. Written once
over an ops module (keras.ops in training, TensorFlow's in the serving graph).
"""

from keras import ops

from keras_bert_suite.layers.sliding_window import masked_attention

# Query rows per block: a length up to this runs as one block (no loop at all).
QUERY_BLOCK = 1024


def query_blocked_attention(query, key, value, keep, block=QUERY_BLOCK, ops=ops,
                            dtype="float32"):
    """`masked_attention(query, key, value, keep)` computed `block` query rows at a time when
    the length exceeds `block`: query, key, value [B, T, N, Dh] -> context [B, T, N, Dh];
    keep: bool [B, 1, 1, T] (the real keys, the same for every query) or [B, 1, T, T] (per
    query: packed rows).

    Inference only (no attention dropout: a random mask drawn inside the loop would not be
    the one training draws). A length unknown when the graph is built (TensorFlow's serving
    signature) chooses at run time between the blocked and the one-block form.
    """
    def whole():
        return masked_attention(query, key, value, keep, ops, dtype)

    static_length = query.shape[1]
    if static_length is not None and static_length <= block:
        return whole()

    def blocked():
        batch, length = ops.shape(query)[0], ops.shape(query)[1]
        heads, head_dim = query.shape[2], query.shape[3]
        blocks = (length + block - 1) // block
        tail = blocks * block - length

        def by_block(x, axis):  # x's `axis` (of length T) -> [nb, ..., C, ...]
            pad = [[0, 0]] * len(x.shape)
            pad[axis] = [0, tail]
            shape = [ops.shape(x)[i] for i in range(len(x.shape))]
            x = ops.reshape(ops.pad(x, pad), shape[:axis] + [blocks, block] + shape[axis + 1:])
            order = list(range(len(x.shape)))
            return ops.transpose(x, [axis] + order[:axis] + order[axis + 1:])

        rows = by_block(query, 1)  # [nb, B, C, N, Dh]
        if keep.shape[2] == 1:  # the same keys for every query
            context = ops.map(lambda q: masked_attention(q, key, value, keep, ops, dtype), rows)
        else:  # [nb, B, 1, C, T]: each block's own rows of the mask (padded as integers)
            keep_rows = by_block(ops.cast(keep, "int32"), 2)
            context = ops.map(lambda pair: masked_attention(
                pair[0], key, value, ops.cast(pair[1], "bool"), ops, dtype),
                (rows, keep_rows))  # [nb, B, C, N, Dh]
        context = ops.transpose(context, (1, 0, 2, 3, 4))
        return ops.reshape(context, (batch, blocks * block, heads, head_dim))[:, :length]

    if static_length is not None:
        return blocked()
    return ops.cond(ops.shape(query)[1] > block, blocked, whole)
