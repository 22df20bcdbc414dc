"""BertTokenClassifier: one label per token (named-entity recognition, BIO tags)."""

import keras

from keras_bert_suite.tasks.task import (
    BertTask, check_label_names, check_num_classes, dropout_and_dense, encoder_inputs,
    freeze_unused_pooler)
from keras_bert_suite.models.token_losses import (
    IGNORE_LABEL, MaskedSparseCategoricalAccuracy, MaskedSparseCategoricalCrossentropy)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertTokenClassifier(BertTask):
    """sequence_output -> dropout -> Dense(num_classes): logits [B, T, num_classes].

    Labels [B, T] are class ids, with `IGNORE_LABEL` (-100) on positions the loss must skip:
    word pieces after a word's first, [CLS], [SEP] and padding (BERT's CoNLL set-up and
    transformers' convention). The default loss is the cross-entropy averaged over the
    labelled positions of the batch, and the accuracy counts those positions only.

    Args:
        encoder: a `BertEncoder`.
        num_classes: number of tags (>= 2).
        preprocessor: optional `BertPreprocessor`; `predict(texts)` then takes raw text
            (training labels must be aligned to the packed word pieces).
        dropout: dropout rate before the classification layer.
        label_names: optional list of `num_classes` tag names, e.g. ["O", "B-PER", ...].

    Example:
    >>> tagger = BertTokenClassifier.from_preset("minilm_l6_h384_uncased", num_classes=3)
    >>> tagger.compile()
    >>> tagger.fit(x, labels)  # labels [B, T], -100 where ignored
    """

    def __init__(self, encoder, num_classes, preprocessor=None, dropout=0.1, label_names=None,
                 **kwargs):
        check_num_classes(num_classes, minimum=2)
        label_names = check_label_names(label_names, num_classes)
        dropout_layer, head = dropout_and_dense(encoder, num_classes, dropout)

        # === Functional graph ===
        inputs = encoder_inputs()
        sequence = encoder(inputs)["sequence_output"]  # [B, T, H]
        logits = head(dropout_layer(sequence))  # [B, T, num_classes]
        super().__init__(inputs, logits, encoder, preprocessor, **kwargs)
        freeze_unused_pooler(encoder)  # the head reads sequence_output only

        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        self.classifier_dropout = dropout_layer
        self.classifier_head = head

    def default_loss(self):
        return MaskedSparseCategoricalCrossentropy(ignore_label=IGNORE_LABEL)

    def default_metrics(self):
        return [MaskedSparseCategoricalAccuracy(ignore_label=IGNORE_LABEL, name="accuracy")]

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, dropout=self.dropout,
                      label_names=self.label_names)
        return config
