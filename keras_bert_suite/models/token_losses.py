"""Loss and accuracy for per-token labels where some positions are ignored.

Token classification labels one position per word (its first word piece); the other word
pieces, [CLS], [SEP] and padding carry `IGNORE_LABEL` (-100, the Hugging Face convention)
and count for nothing: the loss is the mean cross-entropy over the labelled positions of
the whole batch, as in transformers' BertForTokenClassification.
"""

import keras
from keras import ops

IGNORE_LABEL = -100


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Sparse cross-entropy from logits averaged over positions whose label != ignore_label.

    `y_true` [B, T] ints, `y_pred` [B, T, C] logits.

    Example:
    >>> loss = MaskedSparseCategoricalCrossentropy()
    >>> loss(np.array([[1, -100]]), logits)  # only position 0 counts
    """

    def __init__(self, ignore_label=IGNORE_LABEL, name="masked_sparse_categorical_crossentropy",
                 reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.ignore_label = ignore_label

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        y_pred = ops.cast(y_pred, "float32")
        labelled = ops.not_equal(y_true, self.ignore_label)  # [B, T]
        safe_labels = ops.where(labelled, y_true, 0)
        cross_entropy = keras.losses.sparse_categorical_crossentropy(
            safe_labels, y_pred, from_logits=True)  # [B, T]
        weights = ops.cast(labelled, "float32")
        # Scale so the reduction's mean over all B·T entries becomes the mean over the
        # labelled ones (a batch with no labelled position gives 0, not NaN).
        total = ops.cast(ops.size(weights), "float32")
        weights = weights * ops.divide_no_nan(total, ops.sum(weights))
        return cross_entropy * weights

    def get_config(self):
        config = super().get_config()
        config["ignore_label"] = self.ignore_label
        return config


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedSparseCategoricalAccuracy(keras.metrics.Mean):
    """Fraction of labelled positions (label != ignore_label) whose argmax is right.

    Example:
    >>> metric = MaskedSparseCategoricalAccuracy()
    >>> metric.update_state(labels, logits); metric.result()
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
