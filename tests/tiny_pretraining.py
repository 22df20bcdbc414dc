"""A tiny BERT and a pretraining batch for the pretrainer, head and training tests."""

import keras
import numpy as np

from keras_bert_suite import BertEncoder, BertPretrainer

VOCABULARY_SIZE = 50
# For a handful of tiny steps: tracing TensorFlow's train function (~5 s) costs more than
# running eagerly, while JAX's eager ops are slow and its jit is cheap.
RUN_EAGERLY = keras.backend.backend() == "tensorflow"

TINY = dict(vocabulary_size=VOCABULARY_SIZE, num_layers=2, num_heads=2, hidden_dim=8,
            intermediate_dim=16, max_sequence_length=16, dropout=0.0)


def tiny_pretrainer(next_sentence_prediction=True, **overrides):
    return BertPretrainer(BertEncoder(**{**TINY, **overrides}),
                          next_sentence_prediction=next_sentence_prediction)


def pretraining_batch(batch=4, length=10, predictions=3, seed=0):
    """(x, y) with the last prediction slot of rows 1 and 3 padded (weight 0)."""
    rng = np.random.default_rng(seed)
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 7:] = 0
    mask_positions = np.stack([
        np.sort(rng.choice(np.arange(1, 7), predictions, replace=False)) for _ in range(batch)])
    weights = np.ones((batch, predictions), "float32")
    weights[1::2, -1] = 0.0
    mask_positions[1::2, -1] = 0  # padded slots point at [CLS], as BERT's data pads them
    x = {
        "token_ids": rng.integers(1, VOCABULARY_SIZE, (batch, length)).astype("int32"),
        "segment_ids": (np.arange(length)[None, :] >= length // 2).astype("int32").repeat(
            batch, 0),
        "padding_mask": padding_mask,
        "mask_positions": mask_positions.astype("int32"),
    }
    y = {
        "mlm_labels": rng.integers(0, VOCABULARY_SIZE, (batch, predictions)).astype("int32"),
        "mlm_weights": weights,
        "nsp_labels": (np.arange(batch) % 2).astype("int32"),
    }
    return x, y
