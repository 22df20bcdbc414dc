"""BertClassifier: sentence / sentence-pair classification and regression (GLUE style)."""

import keras

from keras_bert_suite.checkpoints.task_heads import CheckpointForm, TransformersHead
from keras_bert_suite.tasks.head_parts import (
    check_label_names, check_num_classes, dropout_and_dense, encoder_inputs, resolve_encoder)
from keras_bert_suite.tasks.labelled_head import LabelledHeadTask
from keras_bert_suite.tasks.classifier.serving import serving_signatures


def _classify(dropout_layer, head, encoder_outputs):
    """The head: pooled_output -> dropout -> Dense (the graph and `head_outputs` both)."""
    return head(dropout_layer(encoder_outputs["pooled_output"]))


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertClassifier(LabelledHeadTask):
    """pooled_output -> dropout -> Dense(num_classes): logits [B, num_classes] ("logits").

    `num_classes=1` is regression (STS-B style): the default loss is mean squared error on
    float labels [B]. Otherwise labels are class ids [B] and the default loss is softmax
    cross-entropy. Sentence pairs need nothing special: the preprocessor packs
    `[CLS] a [SEP] b [SEP]` and the segment ids tell the encoder which is which.

    With a preprocessor, `fit`/`evaluate`/`predict` also take raw text: a list of strings,
    a pair `(a_list, b_list)`, or a `tf.data.Dataset` of `(text, label)` batches.

    Args:
        encoder (or backbone): a `BertEncoder`.
        num_classes: number of classes (1 = regression).
        preprocessor: optional `BertPreprocessor` (text -> encoder inputs).
        dropout: dropout rate before the classification layer (BERT used 0.1).
        label_names: optional list of `num_classes` class names (kept for export).

    Example (a tiny randomly initialised BERT; "minilm_l6_h384_uncased" has real weights):
    >>> classifier = BertClassifier.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2,
    ...     sequence_length=16, label_names=["rotten", "fresh"])
    >>> history = classifier.fit(["a gripping drama", "a dull mess"], [1, 0], epochs=1,
    ...                          verbose=0)
    >>> classifier.predict(["what a film"], verbose=0).shape  # logits [B, num_classes]
    (1, 2)
    """

    task_name = "classifier"
    head_layer_name = "classifier_head"  # its Dense, as checkpoints of other libraries hold it

    def __init__(self, encoder=None, num_classes=None, preprocessor=None, dropout=0.1,
                 label_names=None, backbone=None, **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        check_num_classes(num_classes)
        label_names = check_label_names(label_names, num_classes)
        dropout_layer, head = dropout_and_dense(encoder, num_classes, dropout)

        # === Functional graph ===
        inputs = encoder_inputs()
        logits = _classify(dropout_layer, head, encoder(inputs))  # [B, num_classes]
        super().__init__(inputs, logits, encoder, preprocessor, **kwargs)

        self.keep_head(num_classes, dropout, label_names, dropout_layer, head)

    def head_outputs(self, encoder_outputs, inputs=None):
        return _classify(self.classifier_dropout, self.classifier_head, encoder_outputs)

    def serving_signatures(self, pair=False):
        return serving_signatures(self, pair=pair)

    # Elsewhere: transformers' {Family}ForSequenceClassification, KerasHub's TextClassifier.
    checkpoint_form = CheckpointForm(
        transformers=TransformersHead("ForSequenceClassification", "classifier", families={
            # dense -> tanh (ELECTRA: GELU) -> out_proj on [CLS]: our pooler + head
            "roberta": ("classifier.out_proj", "classifier.dense"),
            "electra": ("classifier.out_proj", "classifier.dense"),
            # pre_classifier -> ReLU -> classifier: our pooler + head
            "distilbert": ("classifier", "pre_classifier"),
            # head (dense -> GELU -> norm on [CLS] or the tokens' mean): our pooler
            "modernbert": ("classifier", "head"),
            # ContextPooler (dense -> GELU on [CLS]) beside the base model: our pooler
            "deberta": ("classifier", "pooler.dense")}),
        keras_hub="classifier")

    def default_loss(self):
        if self.num_classes == 1:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.num_classes == 1:
            return [keras.metrics.MeanAbsoluteError(name="mae")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
