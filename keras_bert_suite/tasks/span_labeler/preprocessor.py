"""SpanLabelerPreprocessor: (question, context) strings -> windows the span labeler reads.

The one text path of extractive QA: training data, evaluation, `predict` on raw strings and
the exported SavedModel all window a context here (TensorFlow + tf-text ops only).

```
question ─tokenize─▶ first max_question_length pieces ─┐
context ──tokenize with byte offsets──▶ windows ───────┴─▶ [CLS] question [SEP] window [SEP]
                                                          + where each window sits, which of
                                                            its pieces have max context, and
                                                            (training) the answer's positions
```

Windows follow google-research/bert's `run_squad.py`: each holds `sequence_length -
len(question) - 3` context pieces and the next starts `doc_stride` pieces later; a piece
covered by several windows is an answer start only in the window that gives it the most
context. Training labels are positions in the packed window; a window that does not hold the
whole answer, and an unanswerable question, are labelled 0 ([CLS]).

The answer's pieces are found from the tokenizer's offsets (the first piece that ends after
the answer starts, the last piece that starts before it ends) rather than from
whitespace words and run_squad's `_improve_answer_span` string search: the two agree
whenever that search succeeds, and where it fails ("1,000" in "$1,000.") this keeps the
exact pieces.
"""

import dataclasses

import keras
import tensorflow as tf

from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager
from keras_bert_suite.text.preprocessing_layer import to_string_tensor
from keras_bert_suite.text.preprocessor import TokenizingPreprocessor
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from keras_bert_suite.text.utf8 import char_to_byte_offset, sanitize_utf8
from keras_bert_suite.text.windows import Windows

# Position of [CLS]: the label of windows without the answer and of unanswerable questions.
NO_ANSWER_POSITION = 0


@dataclasses.dataclass
class SpanWindows:
    """The windows of a batch of B examples (N windows, T = sequence_length).

    inputs: {"token_ids", "segment_ids", "padding_mask"} int32 [N, T].
    labels: {"start_positions", "end_positions"} int32 [N], or None without answers.
    example: [N] int64 the example of each window; row_splits: [B + 1] windows per example.
    piece_start: [N] int64 the window's first context piece (index into the context's pieces).
    context_begin, context_length: [N] int64 where the context pieces sit in the packed row.
    is_max_context: [N, T] bool (False outside the context part).
    context: [B] the contexts as valid UTF-8 (what byte offsets refer to).
    piece_byte_start, piece_byte_end: [B, None] ragged int64 byte offsets of context pieces.
    answer_found: [B] bool, the answer covers at least one piece (True without answers).
    """

    inputs: dict
    labels: object
    example: tf.Tensor
    row_splits: tf.Tensor
    piece_start: tf.Tensor
    context_begin: tf.Tensor
    context_length: tf.Tensor
    is_max_context: tf.Tensor
    context: tf.Tensor
    piece_byte_start: tf.RaggedTensor
    piece_byte_end: tf.RaggedTensor
    answer_found: tf.Tensor


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class SpanLabelerPreprocessor(TokenizingPreprocessor):
    """Windows (question, context) pairs for `BertSpanLabeler`.

    Args:
        tokenizer: a `BertTokenizer`, `BytePairTokenizer` or `SentencePieceTokenizer`.
        sequence_length: length of every window, special tokens included (run_squad: 384).
        doc_stride: the next window starts this many context pieces later (run_squad: 128).
        max_question_length: a longer question keeps its first pieces; default run_squad's
            64, or a third of the row when `sequence_length` is too short for that.

    Call: `x = (questions, contexts)` strings [B]; optional `y = {"answer_start": [B] int
    character offsets into the context (-1: unanswerable), "answer_text": [B] str}`.
    Returns the window inputs `{"token_ids", "segment_ids", "padding_mask"}` [N, T] (and
    `(inputs, {"start_positions", "end_positions"})` with `y`), so `ds.map(preprocessor)`
    turns a dataset of example batches into window batches for `fit`. `windows()` returns
    everything the postprocessor needs as well.

    Example:
    >>> from keras_bert_suite import BertTokenizer
    >>> tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    >>> preprocessor = SpanLabelerPreprocessor(tokenizer, sequence_length=384)
    >>> inputs = preprocessor((["Who wrote it?"], ["It was written by Anna."]))
    >>> inputs["token_ids"].shape
    (1, 384)
    """

    def __init__(self, tokenizer, sequence_length=384, doc_stride=128, max_question_length=None,
                 **kwargs):
        if max_question_length is None and isinstance(sequence_length, int):
            max_question_length = min(64, max(1, (sequence_length - 3) // 3))
        for name, value in (("sequence_length", sequence_length), ("doc_stride", doc_stride),
                            ("max_question_length", max_question_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if max_question_length + 3 >= sequence_length:
            raise ValueError(
                f"max_question_length ({max_question_length}) + 3 special tokens leaves no room "
                f"for the context in sequence_length ({sequence_length}); use a "
                f"max_question_length below {sequence_length - 3} (run_squad uses 64 with 384).")
        super().__init__(tokenizer, sequence_length, **kwargs)
        self.doc_stride = doc_stride
        self.max_question_length = max_question_length

    @tf.autograph.experimental.do_not_convert
    def call(self, x, y=None, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("SpanLabelerPreprocessor makes several windows per example; "
                             "per-example sample_weight is not supported.")
        question, context = _pair(x)
        answer_start = answer_text = None
        if y is not None:
            if not isinstance(y, dict) or set(y) != {"answer_start", "answer_text"}:
                raise ValueError("Span labeler labels are a dict {'answer_start': character "
                                 "offsets (-1: no answer), 'answer_text': strings}.")
            answer_start, answer_text = y["answer_start"], y["answer_text"]
        windows = self.windows(question, context, answer_start, answer_text)
        result = windows.inputs if y is None else (windows.inputs, windows.labels)
        return to_numpy_if_eager(result)

    def windows(self, question, context, answer_start=None, answer_text=None):
        """question, context [B] strings (+ answers) -> `SpanWindows`."""
        question = sanitize_utf8(to_string_tensor(question, "question"))
        context = sanitize_utf8(to_string_tensor(context, "context"))
        question_ids = self.tokenizer(question)[:, :self.max_question_length]  # [B, None]
        ids, byte_start, byte_end = self.tokenizer.tokenize_with_offsets(context)  # [B, None]
        question_length = tf.cast(question_ids.row_lengths(), tf.int64)
        windows = Windows(ids.row_lengths(), self.sequence_length - 3 - question_length,
                          self.doc_stride)
        window_question = tf.gather(question_ids, windows.example)  # [N, None]
        window_pieces = windows.gather(ids)  # [N, None]
        inputs = self.packer((window_question, window_pieces))
        context_begin = tf.gather(question_length, windows.example) + 2  # [CLS] q [SEP]
        max_context = windows.max_context()  # [N, None]
        prefix = tf.ragged.range(context_begin) < 0  # [N, None] all False
        is_max_context = tf.concat([prefix, max_context], axis=1).to_tensor(
            False, shape=[None, self.sequence_length])
        labels, found = None, tf.ones_like(question_length, tf.bool)
        if answer_start is not None:
            labels, found = self._labels(windows, context, byte_start, byte_end, context_begin,
                                         answer_start, answer_text)
        return SpanWindows(
            inputs=inputs, labels=labels, example=windows.example,
            row_splits=windows.row_splits, piece_start=windows.start,
            context_begin=context_begin, context_length=windows.end - windows.start,
            is_max_context=is_max_context, context=context, piece_byte_start=byte_start,
            piece_byte_end=byte_end, answer_found=found)

    def _labels(self, windows, context, byte_start, byte_end, context_begin, answer_start,
                answer_text):
        """Start/end positions [N] in the packed windows; and [B] answer-has-pieces."""
        answer_start = tf.cast(tf.convert_to_tensor(answer_start), tf.int64)
        answer_text = to_string_tensor(answer_text, "answer_text")
        answerable = answer_start >= 0
        begin = char_to_byte_offset(context, tf.maximum(answer_start, 0))  # [B]
        end = begin + tf.cast(tf.strings.length(answer_text, unit="BYTE"), tf.int64)
        # pieces overlapping [begin, end): ends after the answer starts, starts before it ends
        overlap = (byte_end > begin[:, None]) & (byte_start < end[:, None])  # [B, None]
        index = tf.ragged.range(overlap.row_lengths())
        none = tf.int64.max
        first = tf.reduce_min(tf.ragged.boolean_mask(index, overlap), axis=1)  # max if none
        last = tf.reduce_max(tf.ragged.boolean_mask(index, overlap), axis=1)
        found = first != none
        has_answer = answerable & found
        first, last = tf.gather(first, windows.example), tf.gather(last, windows.example)
        inside = (tf.gather(has_answer, windows.example) & (windows.start <= first)
                  & (last < windows.end))
        start_position = tf.where(inside, first - windows.start + context_begin,
                                  NO_ANSWER_POSITION)
        end_position = tf.where(inside, last - windows.start + context_begin, NO_ANSWER_POSITION)
        labels = {"start_positions": tf.cast(start_position, tf.int32),
                  "end_positions": tf.cast(end_position, tf.int32)}
        return labels, found | ~answerable

    def get_config(self):
        return {**super().get_config(), "doc_stride": self.doc_stride,
                "max_question_length": self.max_question_length}

    @classmethod
    def from_preset(cls, preset, sequence_length=384, doc_stride=128, max_question_length=None,
                    **tokenizer_kwargs):
        """The preset's tokenizer (see `tokenizer_from_preset`) with these windows."""
        return cls(tokenizer_from_preset(preset, **tokenizer_kwargs), sequence_length,
                   doc_stride, max_question_length)


def _pair(x):
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError("Span labeler text input is a pair (questions, contexts): two lists "
                         "(or string tensors) of the same length.")
    return x
