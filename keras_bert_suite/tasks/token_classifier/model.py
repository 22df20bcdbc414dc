"""BertTokenClassifier: one label per token (named-entity recognition, BIO tags)."""

import keras

from keras_bert_suite.checkpoints.task_heads import CheckpointForm, TransformersHead
from keras_bert_suite.tasks.head_parts import (
    check_label_names, check_num_classes, dropout_and_dense, encoder_inputs,
    freeze_unused_pooler, resolve_encoder, token_rows)
from keras_bert_suite.tasks.labelled_head import LabelledHeadTask
from keras_bert_suite.tasks.token_classifier.preprocessor import (
    TokenClassifierPreprocessor, as_words)
from keras_bert_suite.text import task_inputs
from keras_bert_suite.training.losses import IGNORE_LABEL, MaskedSparseCategoricalCrossentropy
from keras_bert_suite.training.metrics import MaskedSparseCategoricalAccuracy
from keras_bert_suite.tasks.classifier.serving import label_table
from keras_bert_suite.tasks.token_classifier.serving import tag_words, serving_signatures


def _tag(encoder, dropout_layer, head, encoder_outputs):
    """The head: the token rows (`token_rows`) -> dropout -> Dense (the graph and
    `head_outputs` both)."""
    return head(dropout_layer(token_rows(encoder, encoder_outputs)))


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertTokenClassifier(LabelledHeadTask):
    """sequence_output -> dropout -> Dense(num_classes): logits [B, T, num_classes] (a
    ModernBERT encoder's rows go through its pooler first, as transformers' head does).

    Labels [B, T] are class ids, with `IGNORE_LABEL` (-100) on positions the loss must skip:
    word pieces after a word's first, [CLS], [SEP] and padding (BERT's CoNLL set-up and
    transformers' convention). The default loss is the cross-entropy averaged over the
    labelled positions of the batch, and the accuracy counts those positions only.

    With a `TokenClassifierPreprocessor` (what `from_preset` builds) the model takes words:
    `fit(words, tag_ids)` with a list of words per sentence and one label id per word, and
    `predict(words)` or `predict(texts)` returns {"tags", "tag_scores", "num_words"} (and
    "words" for raw text), rows padded after num_words — the text path (serving.py) that
    evaluation and the exported model run.

    Args:
        encoder (or backbone): a `BertEncoder`.
        num_classes: number of tags (>= 2).
        preprocessor: optional `TokenClassifierPreprocessor`.
        dropout: dropout rate before the classification layer.
        label_names: optional list of `num_classes` tag names, e.g. ["O", "B-PER", ...].

    Example (a tiny randomly initialised BERT, so the tags are not yet meaningful):
    >>> tagger = BertTokenClassifier.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=3,
    ...     sequence_length=16, label_names=["O", "B-LOC", "I-LOC"])
    >>> history = tagger.fit([["I", "love", "New", "York"]], [[0, 0, 1, 2]], verbose=0)
    >>> outputs = tagger.predict([["I", "love", "Paris"], ["New", "York", "is", "big"]],
    ...                          verbose=0)
    >>> outputs["num_words"], outputs["tags"].shape  # tags [B, words], padded with ""
    (array([3, 4]), (2, 4))
    >>> set(outputs["tags"][0][:3]) <= {"O", "B-LOC", "I-LOC"}
    True
    """

    task_name = "token_classifier"
    head_layer_name = "classifier_head"  # its Dense, as checkpoints of other libraries hold it
    labels_per_token = True
    outputs_per_token = True
    preprocessor_class = TokenClassifierPreprocessor

    def __init__(self, encoder=None, num_classes=None, preprocessor=None, dropout=0.1,
                 label_names=None, backbone=None, **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        check_num_classes(num_classes, minimum=2)
        label_names = check_label_names(label_names, num_classes)
        dropout_layer, head = dropout_and_dense(encoder, num_classes, dropout)

        # === Functional graph ===
        inputs = encoder_inputs()
        logits = _tag(encoder, dropout_layer, head, encoder(inputs))  # [B, T, num_classes]
        super().__init__(inputs, logits, encoder, preprocessor, **kwargs)
        freeze_unused_pooler(encoder)  # the head reads the token rows only

        self.keep_head(num_classes, dropout, label_names, dropout_layer, head)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """Words or raw text: the tags (see the class doc); encoder inputs: the logits."""
        if self.preprocessor is None or not (task_inputs.is_text(x) or
                                             as_words(x) is not None):
            return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)

        return self._predict_text(tag_words, [x], batch_size, verbose,
                                  label_names=label_table(self.label_names, self.num_classes))

    def head_outputs(self, encoder_outputs, inputs=None):
        return _tag(self.encoder, self.classifier_dropout, self.classifier_head,
                    encoder_outputs)

    def serving_signatures(self):
        return serving_signatures(self)

    # Elsewhere: transformers' {Family}ForTokenClassification (the head reads the sequence;
    # ModernBERT's runs its prediction head, our pooler, on every token first).
    checkpoint_form = CheckpointForm(
        transformers=TransformersHead("ForTokenClassification", "classifier", pooler=None,
                                      families={"modernbert": ("classifier", "head")}))

    def default_loss(self):
        return MaskedSparseCategoricalCrossentropy(ignore_label=IGNORE_LABEL)

    def default_metrics(self):
        return [MaskedSparseCategoricalAccuracy(ignore_label=IGNORE_LABEL, name="accuracy")]
