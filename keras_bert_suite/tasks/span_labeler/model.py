"""BertSpanLabeler: extractive question answering (SQuAD style start / end logits)."""

import keras
from keras import ops

from keras_bert_suite.tasks.task import (
    BertTask, encoder_inputs, freeze_unused_pooler, head_initializer)

# Label names in `y` -> the output each one is scored against.
LABEL_OUTPUTS = {"start_positions": "start_logits", "end_positions": "end_logits"}
# Logit given to padding positions: exp() of it is 0 in float32, so they get no probability.
PADDING_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertSpanLabeler(BertTask):
    """sequence_output -> Dense(2) -> {"start_logits": [B, T], "end_logits": [B, T]}.

    Inputs pack `[CLS] question [SEP] context [SEP]`. Padding positions get a logit of -1e9
    (float32 outputs). For SQuAD 2.0 "no answer" is position 0 ([CLS]): label it with
    start = end = 0, and compare a span's score with the [CLS] score at inference.

    Labels for `fit`/`evaluate`: a dict {"start_positions": [B], "end_positions": [B]}
    (token indices in the packed sequence). The default loss is BERT's: the mean of the
    start and end softmax cross-entropies; metrics `start_logits_accuracy`,
    `end_logits_accuracy`.

    Args:
        encoder: a `BertEncoder`.
        preprocessor: optional `BertPreprocessor`; with it `predict((questions, contexts))`
            takes raw text (training labels must then be positions in the packed tokens).

    Example:
    >>> labeler = BertSpanLabeler.from_preset("minilm_l6_h384_uncased", sequence_length=384)
    >>> labeler.compile()
    >>> labeler.fit(x, {"start_positions": starts, "end_positions": ends})
    >>> labeler.predict((["Who wrote it?"], ["It was written by Ann."]))["start_logits"]
    """

    def __init__(self, encoder, preprocessor=None, **kwargs):
        policy = encoder.token_embedding.dtype_policy
        head = keras.layers.Dense(2, kernel_initializer=head_initializer(encoder), dtype=policy,
                                  name="span_logits")

        # === Functional graph ===
        inputs = encoder_inputs()
        logits = ops.cast(head(encoder(inputs)["sequence_output"]), "float32")  # [B, T, 2]
        real = ops.cast(inputs["padding_mask"], "bool")  # [B, T]
        outputs = {
            "start_logits": ops.where(real, logits[:, :, 0], PADDING_LOGIT),  # [B, T]
            "end_logits": ops.where(real, logits[:, :, 1], PADDING_LOGIT),  # [B, T]
        }
        super().__init__(inputs, outputs, encoder, preprocessor, **kwargs)
        self.span_head = head
        freeze_unused_pooler(encoder)  # the head reads sequence_output only

    def default_loss(self):
        return {output: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                for output in LABEL_OUTPUTS.values()}

    def default_loss_weights(self):
        return {output: 0.5 for output in LABEL_OUTPUTS.values()}  # (start + end) / 2

    def default_metrics(self):
        return {output: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                for output in LABEL_OUTPUTS.values()}

    def labels_by_output(self, y, sample_weight):
        if y is None:
            return y, sample_weight
        if not isinstance(y, dict):
            raise ValueError("BertSpanLabeler labels are a dict {'start_positions': [B], "
                             f"'end_positions': [B]}}, got {type(y).__name__}.")
        y = {LABEL_OUTPUTS.get(name, name): value for name, value in y.items()}
        if set(y) != set(LABEL_OUTPUTS.values()):
            raise ValueError(f"BertSpanLabeler expects labels {sorted(LABEL_OUTPUTS)}; got "
                             f"{sorted(y)}.")
        if sample_weight is not None and not isinstance(sample_weight, dict):
            sample_weight = {output: sample_weight for output in y}  # one weight per example
        elif isinstance(sample_weight, dict):
            sample_weight = {LABEL_OUTPUTS.get(name, name): value
                             for name, value in sample_weight.items()}
        return y, sample_weight
