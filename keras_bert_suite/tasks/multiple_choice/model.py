"""BertMultipleChoice: pick one of C candidate continuations (SWAG style)."""

import keras
from keras import ops

from keras_bert_suite.layers.choice_folding import FoldChoices
from keras_bert_suite.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from keras_bert_suite.checkpoints.task_heads import CheckpointForm, TransformersHead
from keras_bert_suite.names import ENCODER_INPUTS
from keras_bert_suite.tasks.head_parts import (
    check_num_classes, dropout_and_dense, encoder_inputs, resolve_encoder)
from keras_bert_suite.tasks.task import BertTask
from keras_bert_suite.tasks.multiple_choice.serving import serving_signatures


def _choice_logits(inputs, run_encoder, fold, dropout_layer, head, num_choices):
    """[B, C, T] inputs folded to [B·C, T], one score per pooled output, unfolded to [B, C]."""
    folded = {name: fold(inputs[name]) for name in ENCODER_INPUTS}  # [B·C, T]
    pooled = run_encoder(folded)["pooled_output"]  # [B·C, H]
    scores = head(dropout_layer(pooled))  # [B·C, 1]
    return ops.reshape(scores, (-1, num_choices))  # [B, C]


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertMultipleChoice(BertTask):
    """Scores each (context, choice) pair; logits [B, num_choices], softmax over choices.

    Inputs are [B, C, T]: row c packs `[CLS] context [SEP] choice_c [SEP]`. They are folded
    to [B·C, T] for the encoder, each pooled output gets one score (Dense(1)), and the
    scores are unfolded to [B, C] (BERT's SWAG set-up). Labels [B]: the right choice's index.

    With a `MultipleChoicePreprocessor` (what `from_preset` builds), text inputs are a pair
    `(contexts [B], choices [B, C])` of strings, packed by the same preprocessor the exported
    `serving_default` runs.

    Args:
        encoder (or backbone): a `BertEncoder`.
        num_choices: C, the number of candidates per example (>= 2).
        preprocessor: optional `MultipleChoicePreprocessor`.
        dropout: dropout rate before the scoring layer.

    Example (a tiny randomly initialised BERT, to show the shapes):
    >>> chooser = BertMultipleChoice.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_choices=2, sequence_length=16)
    >>> contexts = ["She opens the door.", "He picks up the guitar."]
    >>> choices = [["She walks in.", "She eats the door."],
    ...            ["He plays a song.", "He drinks the guitar."]]
    >>> history = chooser.fit((contexts, choices), [0, 0], epochs=1, verbose=0)
    >>> chooser.predict((contexts, choices), verbose=0).shape  # logits [B, num_choices]
    (2, 2)
    """

    task_name = "multiple_choice"
    head_layer_name = "choice_head"  # its Dense, as checkpoints of other libraries hold it
    preprocessor_class = MultipleChoicePreprocessor
    input_rank = 3
    input_legend = "[batch, num_choices, sequence_length]"

    def __init__(self, encoder=None, num_choices=None, preprocessor=None, dropout=0.1,
                 backbone=None, **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        check_num_classes(num_choices, minimum=2, what="num_choices")
        fold = FoldChoices(name="fold_choices")
        dropout_layer, head = dropout_and_dense(encoder, 1, dropout, name="choice_score")

        # === Functional graph ===
        inputs = encoder_inputs(shape=(num_choices, None))  # [B, C, T]
        logits = _choice_logits(inputs, encoder, fold, dropout_layer, head, num_choices)
        super().__init__(inputs, logits, encoder, preprocessor, **kwargs)

        self.num_choices = num_choices
        self.dropout = dropout
        self.fold_choices = fold
        self.classifier_dropout = dropout_layer
        self.choice_head = head
        self.compile()

    def call_with_encoder(self, inputs, run_encoder):
        return _choice_logits(inputs, run_encoder, self.fold_choices, self.classifier_dropout,
                              self.choice_head, self.num_choices)

    def _check_inputs(self, inputs):
        super()._check_inputs(inputs)
        for name in ENCODER_INPUTS:
            choices = tuple(inputs[name].shape)[1]
            if choices is not None and choices != self.num_choices:
                raise ValueError(f"BertMultipleChoice(num_choices={self.num_choices}): "
                                 f"'{name}' has {choices} choices (shape "
                                 f"{tuple(inputs[name].shape)}).")

    def serving_signatures(self):
        return serving_signatures(self)

    # Elsewhere: transformers' {Family}ForMultipleChoice (one score per choice).
    checkpoint_form = CheckpointForm(
        transformers=TransformersHead("ForMultipleChoice", "classifier", units=1, families={
            "electra": ("classifier", "sequence_summary.summary"),  # a GELU summary: our pooler
            "distilbert": ("classifier", "pre_classifier"),  # pre_classifier -> ReLU
            "modernbert": ("classifier", "head"),  # dense -> GELU -> norm: our pooler
            "deberta": ("classifier", "pooler.dense")}))  # ContextPooler: our pooler

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def get_config(self):
        config = super().get_config()
        config.update(num_choices=self.num_choices, dropout=self.dropout)
        return config
