"""Pretraining metrics Keras does not ship."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedLMPerplexity(keras.metrics.Mean):
    """exp(mean cross-entropy) over the real masked-LM predictions seen so far.

    `y_true` [B, P] token ids, `y_pred` [B, P, V] logits, `sample_weight` [B, P] with 0 on
    padded prediction slots: the mean is weighted, so padded slots count for nothing.
    The exponential is taken of the running mean (not averaged per batch), which is what
    perplexity over a whole evaluation set means.
    """

    def __init__(self, name="mlm_perplexity", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        cross_entropy = keras.losses.sparse_categorical_crossentropy(
            y_true, ops.cast(y_pred, "float32"), from_logits=True)  # [B, P]
        super().update_state(cross_entropy, sample_weight=sample_weight)

    def result(self):
        return ops.exp(super().result())

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
