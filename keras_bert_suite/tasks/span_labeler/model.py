"""BertSpanLabeler: extractive question answering (SQuAD style start / end logits)."""

import keras
from keras import ops

from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor
from keras_bert_suite.checkpoints.task_heads import CheckpointForm, TransformersHead
from keras_bert_suite.tasks.head_parts import (
    encoder_inputs, freeze_unused_pooler, head_initializer, resolve_encoder, token_rows)
from keras_bert_suite.tasks.task import BertTask
from keras_bert_suite.text import task_inputs
from keras_bert_suite.tasks.span_labeler.serving import answer_questions, serving_signatures

# Label names in `y` -> the output each one is scored against.
LABEL_OUTPUTS = {"start_positions": "start_logits", "end_positions": "end_logits"}
# Logit given to padding positions: exp() of it is 0 in float32, so they get no probability.
PADDING_LOGIT = -1e9


def _span_logits(encoder, head, encoder_outputs, padding_mask):
    """The head on the token rows (`token_rows`; the graph and `head_outputs` both):
    {"start_logits", "end_logits"} [B, T], float32, padding positions at PADDING_LOGIT."""
    logits = ops.cast(head(token_rows(encoder, encoder_outputs)), "float32")  # [B, T, 2]
    real = ops.cast(padding_mask, "bool")  # [B, T]
    return {"start_logits": ops.where(real, logits[:, :, 0], PADDING_LOGIT),
            "end_logits": ops.where(real, logits[:, :, 1], PADDING_LOGIT)}


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertSpanLabeler(BertTask):
    """sequence_output -> Dense(2) -> {"start_logits": [B, T], "end_logits": [B, T]} (a
    ModernBERT encoder's rows go through its pooler first, as transformers' head does).

    Inputs pack `[CLS] question [SEP] context [SEP]`. Padding positions get a logit of -1e9
    (float32 outputs). For SQuAD 2.0 "no answer" is position 0 ([CLS]): label it with
    start = end = 0, and compare a span's score with the [CLS] score at inference.

    Labels for `fit`/`evaluate` on windows: a dict {"start_positions": [B],
    "end_positions": [B]} (token indices in the packed window). The default loss is BERT's:
    the mean of the start and end softmax cross-entropies; metrics `start_logits_accuracy`,
    `end_logits_accuracy`.

    With a `SpanLabelerPreprocessor` (what `from_preset` builds) the model takes raw text:
    `fit((questions, contexts), {"answer_start": character offsets, "answer_text": str})`
    trains on the windows of each example, and `predict((questions, contexts))` returns the
    answers {"answer", "start", "end", "score", "null_score_diff"} — the same text path
    (postprocessor.py) that evaluation and the exported `serving_default` run.

    Args:
        encoder (or backbone): a `BertEncoder`.
        preprocessor: optional `SpanLabelerPreprocessor`.

    Example (a tiny randomly initialised BERT, so the answer is not yet meaningful):
    >>> labeler = BertSpanLabeler.from_preset(
    ...     "bert_uncased_L-2_H-128_A-2", load_weights=False, sequence_length=32)
    >>> history = labeler.fit((["Who wrote it?"], ["It was written by Ann."]),
    ...                       {"answer_start": [18], "answer_text": ["Ann"]}, verbose=0)
    >>> answers = labeler.predict((["Who wrote it?"], ["It was written by Ann."]), verbose=0)
    >>> sorted(answers)
    ['answer', 'end', 'null_score_diff', 'score', 'start']
    >>> start, end = answers["start"][0], answers["end"][0]  # character offsets
    >>> answers["answer"][0] == "It was written by Ann."[start:end]
    True
    """

    task_name = "span_labeler"
    head_layer_name = "span_head"  # its Dense, as checkpoints of other libraries hold it
    outputs_per_token = True  # start and end logits per token
    preprocessor_class = SpanLabelerPreprocessor
    default_sequence_length = 384

    def __init__(self, encoder=None, preprocessor=None, backbone=None, **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        policy = encoder.layer_dtype_policy
        head = keras.layers.Dense(2, kernel_initializer=head_initializer(encoder), dtype=policy,
                                  name="span_logits")

        # === Functional graph ===
        inputs = encoder_inputs()
        outputs = _span_logits(encoder, head, encoder(inputs), inputs["padding_mask"])
        super().__init__(inputs, outputs, encoder, preprocessor, **kwargs)
        self.span_head = head
        freeze_unused_pooler(encoder)  # the head reads the token rows only
        self.compile()

    def head_outputs(self, encoder_outputs, inputs):
        return _span_logits(self.encoder, self.span_head, encoder_outputs,
                            inputs["padding_mask"])

    def predict(self, x, batch_size=None, verbose="auto", max_answer_length=30,
                n_best_size=20, version_2_with_negative=False, null_score_diff_threshold=0.0,
                **kwargs):
        """Raw `(questions, contexts)`: the answers (see the class doc; the answer options
        are `postprocessor.best_answers`'); encoder inputs: the start/end logits."""
        if not (self.preprocessor is not None and task_inputs.is_text(x)):
            return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)

        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ValueError("BertSpanLabeler.predict takes raw text as a pair (questions, "
                             "contexts) of equally long lists.")
        return self._predict_text(
            answer_questions, x, batch_size, verbose, max_answer_length=max_answer_length,
            n_best_size=n_best_size, version_2_with_negative=version_2_with_negative,
            null_score_diff_threshold=null_score_diff_threshold)

    def serving_signatures(self, **answer_options):
        return serving_signatures(self, **answer_options)

    # Elsewhere: transformers' {Family}ForQuestionAnswering (start and end: 2 units;
    # ModernBERT's runs its prediction head, our pooler, on every token, then `classifier`).
    checkpoint_form = CheckpointForm(
        transformers=TransformersHead("ForQuestionAnswering", "qa_outputs", pooler=None,
                                      units=2,
                                      families={"modernbert": ("classifier", "head")}))

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
