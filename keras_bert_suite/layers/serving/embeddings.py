"""The serving form of `BertEmbeddings` (dropout is off at inference)."""

import tensorflow as tf

from keras_bert_suite.layers.serving.dense import layer_norm


def embeddings(read, token_ids, segment_ids, padding_mask, has_segments, position_offset,
               epsilon):
    """[B, T] ids -> [B T, E]: token + segment (`has_segments`: DistilBERT has no table) +
    position rows, then LayerNorm. `read`: "token_embedding", "segment_embedding",
    "position_embedding", "layer_norm/{gamma,beta}"."""
    x = tf.gather(read("token_embedding"), token_ids)  # [B, T, E]
    if has_segments:
        x += tf.gather(read("segment_embedding"), segment_ids)
    if position_offset:  # positions counted over real tokens (RoBERTa)
        positions = tf.cumsum(padding_mask, axis=1) * padding_mask + (position_offset - 1)
        x += tf.gather(read("position_embedding"), positions)
    else:
        x += read("position_embedding")[:tf.shape(token_ids)[1]]
    x = tf.reshape(x, [-1, x.shape[-1]])  # [B T, E]: every projection after is 2-D
    return layer_norm(x, read, "layer_norm", epsilon)
