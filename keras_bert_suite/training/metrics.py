"""The library's metrics: masked-LM accuracy and perplexity (built for a 30k vocabulary) and
the token-classification accuracy that skips ignored positions. The losses are in
`training.losses`.

The cross-entropy over the full vocabulary is, after the decoder matmul, the most expensive
op of a BERT pretraining step: `MaskedLMPerplexity`, linked to a `MaskedLMLoss`, reuses the
loss's per-prediction values (O(B·P)) instead of a second full-vocabulary softmax.
`MaskedLMAccuracy` needs one max over the vocabulary where an argmax needs a (value, index)
pair reduction, which XLA on CPU ran at ~8% of a BERT-mini pretraining step.
"""

import keras
from keras import ops

from keras_bert_suite.training.losses import (
    IGNORE_LABEL, label_logits, sparse_cross_entropy_from_logits)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedLMPerplexity(keras.metrics.Mean):
    """exp(mean cross-entropy) over the real masked-LM predictions seen so far.

    `y_true` [B, P] token ids, `y_pred` [B, P, V] logits, `sample_weight` [B, P] with 0 on
    padded prediction slots: the mean is weighted, so padded slots count for nothing.
    The exponential is taken of the running mean (not averaged per batch), which is what
    perplexity over a whole evaluation set means.

    Standalone it computes the cross-entropy from the logits itself. Linked to a
    `MaskedLMLoss` (`loss.link_perplexity(metric)`, which `BertPretrainer.compile` does) it
    takes the loss's per-prediction values instead and ignores `update_state`.

    Example (standalone; uniform logits over 4 tokens give perplexity 4):
    >>> import numpy as np
    >>> perplexity = MaskedLMPerplexity()
    >>> perplexity.update_state(np.array([[2, 0]]), np.zeros((1, 2, 4)),
    ...                         sample_weight=np.array([[1.0, 0.0]]))  # slot 2 is padding
    >>> round(float(perplexity.result()), 4)
    4.0

    In a model: `model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
    from_logits=True), weighted_metrics=[MaskedLMPerplexity()])`.
    """

    def __init__(self, name="mlm_perplexity", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.fed_by_loss = False  # set by MaskedLMLoss.link_perplexity; not serialized

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.fed_by_loss:
            return  # this batch was counted when the loss was computed
        cross_entropy = sparse_cross_entropy_from_logits(y_true, ops.cast(y_pred, "float32"))
        self.update_from_cross_entropy(cross_entropy, sample_weight)

    def update_from_cross_entropy(self, cross_entropy, sample_weight=None):
        """Adds per-prediction cross-entropies [B, P] (weights [B, P], 0 = padded slot)."""
        super().update_state(ops.stop_gradient(cross_entropy), sample_weight=sample_weight)

    def result(self):
        return ops.exp(super().result())

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedLMAccuracy(keras.metrics.Mean):
    """Top-1 accuracy of the masked-LM predictions: the label's logit is the largest.

    The same number as `keras.metrics.SparseCategoricalAccuracy` (weighted the same way:
    `sample_weight` [B, P] with 0 on padded prediction slots), computed as
    `logits[label] >= max(logits)`: one max over the vocabulary and a gather, not an argmax.
    The two differ only when another token's logit exactly equals the label's: argmax
    then picks the lower token id, this metric counts the prediction as correct.

    `y_true` [B, P] token ids, `y_pred` [B, P, V] logits.
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.convert_to_tensor(y_pred)
        correct = ops.cast(label_logits(y_true, y_pred) >= ops.max(y_pred, axis=-1), self.dtype)
        super().update_state(correct, sample_weight=sample_weight)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedSparseCategoricalAccuracy(keras.metrics.Mean):
    """Fraction of labelled positions (label != ignore_label) whose argmax is right.

    Example:
    >>> import numpy as np
    >>> labels = np.array([[1, 0, -100]])  # -100: not labelled (e.g. a later word piece)
    >>> logits = np.array([[[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]]])  # argmax 1, 1, 0
    >>> metric = MaskedSparseCategoricalAccuracy()
    >>> metric.update_state(labels, logits)
    >>> float(metric.result())
    0.5
    """

    def __init__(self, ignore_label=IGNORE_LABEL, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.ignore_label = ignore_label

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true), "float32")
        weights = ops.cast(ops.not_equal(y_true, self.ignore_label), "float32")  # [B, T]
        if sample_weight is not None:
            sample_weight = ops.cast(sample_weight, "float32")
            if len(sample_weight.shape) < len(weights.shape):
                sample_weight = ops.expand_dims(sample_weight, -1)  # one weight per example
            weights = weights * sample_weight
        super().update_state(correct, sample_weight=weights)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype, "ignore_label": self.ignore_label}


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ReplacedTokenAccuracy(keras.metrics.Mean):
    """Per-token accuracy of "replaced" logits (positive = replaced), weighted per token by
    `sample_weight` [B, T] (0 at padding). `y_true` [B, T] 1/0, `y_pred` [B, T] logits."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        predicted = ops.cast(ops.convert_to_tensor(y_pred) > 0, "int32")
        correct = ops.cast(ops.equal(predicted, ops.cast(y_true, "int32")), self.dtype)
        super().update_state(correct, sample_weight=sample_weight)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
