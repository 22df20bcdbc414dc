"""Chunk logits -> one tag per word, in the graph (TF ops only).

A word's tag is the most probable label at its first piece (the piece that carried the
word's label in training); its score is that probability.
"""

import tensorflow as tf


def word_tags(chunks, logits):
    """`TokenChunks` and the model's [N, T, C] logits -> tag_ids [W] int64, tag_scores [W]
    float32 (words in batch order; `chunks.word_row` says whose)."""
    logits = tf.cast(logits, tf.float32)
    at_piece = tf.stack([chunks.piece_chunk, chunks.piece_position], axis=1)  # [P, 2]
    first_piece = tf.gather_nd(logits, tf.boolean_mask(at_piece, chunks.first_piece))  # [W, C]
    probabilities = tf.nn.softmax(first_piece, axis=-1)
    return tf.argmax(probabilities, axis=-1), tf.reduce_max(probabilities, axis=-1)


def per_sentence(values, chunks, default):
    """[W] values in batch order -> [B, max words] padded with `default`."""
    batch = tf.shape(chunks.num_words, out_type=tf.int64)[0]
    ragged = tf.RaggedTensor.from_value_rowids(values, chunks.word_row, nrows=batch)
    return ragged.to_tensor(default)
