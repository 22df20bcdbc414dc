"""The serving form of `BertEmbeddings` (dropout is off at inference): `embeddings.embed` on
gathered table rows, its LayerNorm on 2-D rows."""

import tensorflow as tf

from keras_bert_suite.layers.embeddings import embed, offset_positions
from keras_bert_suite.layers.serving.dense import layer_norm


def embeddings(read, token_ids, segment_ids, padding_mask, has_segments, position_offset,
               epsilon, position_rows=True, norm_bias=True):
    """[B, T] ids -> [B T, E]: token + segment (`has_segments`: DistilBERT has no table) +
    position rows (none without `position_rows`), then LayerNorm (without offset unless
    `norm_bias`). `read`: "token_embedding", "segment_embedding", "position_embedding",
    "layer_norm/{gamma,beta}"."""
    if not position_rows:
        position_rows = None
    elif position_offset:  # positions counted over real tokens (RoBERTa); one instance per row
        positions = offset_positions(tf.cumsum(padding_mask, axis=1) - padding_mask,
                                     padding_mask, position_offset)
        position_rows = tf.gather(read("position_embedding"), positions)
    else:
        position_rows = read("position_embedding")[:tf.shape(token_ids)[1]]
    return embed(_Tables(read, has_segments, epsilon, norm_bias), token_ids, segment_ids,
                 position_rows)


class _Tables:
    """The parts `embed` calls: table rows by tf.gather, the LayerNorm on [B T, E]."""

    def __init__(self, read, has_segments, epsilon, norm_bias):
        self.read, self.has_segments, self.epsilon = read, has_segments, epsilon
        self.norm_bias = norm_bias

    def rows(self, table, ids):
        return tf.gather(self.read(table), ids)

    def norm(self, x):
        x = tf.reshape(x, [-1, x.shape[-1]])  # [B T, E]: every projection after is 2-D
        return layer_norm(x, self.read, "layer_norm", self.epsilon, self.norm_bias)
