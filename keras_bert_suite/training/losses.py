"""Every loss of the library: BERT's masked-LM loss and the token-classification loss.

* `MaskedLMLoss`: the cross-entropy over the full vocabulary ([B·P, V] logits, V ~30k) is,
  after the decoder matmul, the most expensive op of a BERT pretraining step. The loss
  computes it once per step and hands the per-prediction values to a linked
  `training.metrics.MaskedLMPerplexity`, so that metric costs O(B·P) instead of a second
  full-vocabulary softmax.
* `MaskedSparseCategoricalCrossentropy`: token classification labels one position per word
  (its first word piece); the other word pieces, [CLS], [SEP] and padding carry
  `IGNORE_LABEL` (-100, the Hugging Face convention) and count for nothing: the loss is the
  mean cross-entropy over the labelled positions of the whole batch, as in transformers'
  BertForTokenClassification.
"""

import keras
from keras import ops

from keras_bert_suite import backend_kernels

IGNORE_LABEL = -100


def label_logits(labels, logits):
    """Each prediction's logit of its label: labels [B, P], logits [B, P, V] -> [B, P]."""
    return ops.take_along_axis(logits, ops.cast(labels, "int32")[..., None], axis=-1)[..., 0]


def sparse_cross_entropy_from_logits(labels, logits):
    """Per-prediction cross-entropy: labels [B, P] token ids, logits [B, P, V] -> [B, P].

    The same numbers as `keras.losses.sparse_categorical_crossentropy(from_logits=True)`:
    log-sum-exp of the logits minus the label's logit, unless the backend has a faster
    route to the same value (`backend_kernels.sparse_cross_entropy`).
    """
    fast = backend_kernels.sparse_cross_entropy(labels, logits)
    if fast is not None:
        return fast
    return ops.logsumexp(logits, axis=-1) - label_logits(labels, logits)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedLMLoss(keras.losses.Loss):
    """BERT's masked-LM loss: sum(w · CE) / sum(w) over the predicted slots.

    `y_true` [B, P] token ids, `y_pred` [B, P, V] logits, `sample_weight` [B, P] (0 on
    padded prediction slots, which then count for nothing). Numerically the same as
    `keras.losses.SparseCategoricalCrossentropy(from_logits=True,
    reduction="mean_with_sample_weight")`; in addition, a linked `MaskedLMPerplexity`
    receives the per-prediction cross-entropies this loss computed anyway. The link is not
    serialized: `BertPretrainer.compile` makes it again after a `.keras` reload.

    Example (logits that give every one of 4 tokens the same probability: loss log 4,
    perplexity 4; the second slot is padding):
    >>> import numpy as np
    >>> from keras_bert_suite.training.metrics import MaskedLMPerplexity
    >>> logits = keras.Input((2, 4))  # [B, P, V]
    >>> model = keras.Model(logits, {"mlm_logits": keras.layers.Identity()(logits)})
    >>> loss, perplexity = MaskedLMLoss(), MaskedLMPerplexity()
    >>> loss.link_perplexity(perplexity)
    >>> model.compile(loss={"mlm_logits": loss}, weighted_metrics={"mlm_logits": [perplexity]})
    >>> results = model.evaluate(np.zeros((1, 2, 4)), {"mlm_logits": np.array([[2, 0]])},
    ...                          sample_weight={"mlm_logits": np.array([[1.0, 0.0]])},
    ...                          return_dict=True, verbose=0)
    >>> {name: round(value, 4) for name, value in sorted(results.items())}
    {'loss': 1.3863, 'mlm_perplexity': 4.0}
    """

    def __init__(self, name="mlm_loss", reduction="mean_with_sample_weight", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.perplexity = None
        self._sample_weight = None  # only set while __call__ runs (same trace as call)

    def link_perplexity(self, perplexity):
        """From now on `perplexity` is updated by this loss, not by its own update_state."""
        self.perplexity = perplexity
        perplexity.fed_by_loss = True

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras' Loss.__call__ keeps the reduction and tf.distribute loss scaling; call()
        # sees the weights through this attribute to feed the perplexity.
        self._sample_weight = sample_weight
        try:
            return super().__call__(y_true, y_pred, sample_weight=sample_weight)
        finally:
            self._sample_weight = None

    def call(self, y_true, y_pred):
        cross_entropy = sparse_cross_entropy_from_logits(y_true, y_pred)  # [B, P]
        if self.perplexity is not None:
            self.perplexity.update_from_cross_entropy(cross_entropy, self._sample_weight)
        return cross_entropy

    def get_config(self):
        return {**super().get_config(), "dtype": self.dtype}  # Keras' Loss leaves dtype out


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Sparse cross-entropy from logits averaged over positions whose label != ignore_label.

    `y_true` [B, T] ints, `y_pred` [B, T, C] logits.

    Example:
    >>> import numpy as np
    >>> logits = np.array([[[0.0, 0.0], [5.0, -5.0]]])  # [B=1, T=2, C=2]
    >>> loss = MaskedSparseCategoricalCrossentropy()
    >>> round(float(loss(np.array([[1, -100]]), logits)), 4)  # only position 0 counts: log 2
    0.6931
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
        # Keras' Loss leaves dtype out of its config.
        return {**super().get_config(), "dtype": self.dtype, "ignore_label": self.ignore_label}


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ReplacedTokenLoss(keras.losses.Loss):
    """ELECTRA's discriminator loss: sigmoid cross-entropy of every token's "replaced" logit,
    sum(w · CE) / sum(w) with `sample_weight` [B, T] 0 at padding.

    `y_true` [B, T] 1 = replaced, 0 = original; `y_pred` [B, T] logits. (Keras'
    BinaryCrossentropy averages over the last axis first, so it cannot weigh tokens.)

    >>> import numpy as np
    >>> loss = ReplacedTokenLoss()
    >>> round(float(loss(np.array([[1, 0]]), np.zeros((1, 2)), np.array([[1.0, 0.0]]))), 4)
    0.6931
    """

    def __init__(self, name="replaced_token_loss", reduction="mean_with_sample_weight",
                 dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        y_pred = ops.convert_to_tensor(y_pred)
        return ops.binary_crossentropy(ops.cast(y_true, y_pred.dtype), y_pred, from_logits=True)
