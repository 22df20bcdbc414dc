"""Per-task serving signatures: raw text in, what the task means out.

Each task is one function registered with `@register_task(name, model_class_names)`; it gets a
`TaskContext` and returns a `TaskSignatures`: the `serving_default` function (raw strings,
tokenization and packing in the graph), the `encoder_inputs` function (token_ids,
segment_ids, padding_mask), and a few real example inputs for the warmup file. Adding a
task is adding one function here.

Every output has the batch as its first dimension, so TF Serving's row ("instances") format
works. Texts longer than the preprocessor's `sequence_length`: the span labeler and the
token classifier cover the whole text with windows; the classifier, multiple choice and the
embedding tasks read the first `sequence_length` tokens and say so in a `truncated` output.
"""

import dataclasses

import tensorflow as tf

from keras_bert_suite.export.span_search import NO_ANSWER_SCORE, best_spans, best_window
from keras_bert_suite.export.windows import Windows, byte_to_char_offset, sanitize_utf8
from keras_bert_suite.export.words import group_words, word_starts

STRINGS = tf.TensorSpec([None], tf.string)
_TASKS = {}  # task name -> (build function, model class names)


@dataclasses.dataclass
class TaskContext:
    model: object
    preprocessor: object  # BertPreprocessor
    label_names: list  # or None
    options: dict  # task options given to export_saved_model

    @property
    def tokenizer(self):
        return self.preprocessor.tokenizer

    @property
    def sequence_length(self):
        return self.preprocessor.sequence_length

    def call_model(self, inputs):
        return self.model(inputs, training=False)

    def pack(self, *texts):
        """Tokenizes and packs [B] strings (one or two segments); also returns [B] bool
        `truncated`: the packed row could not hold every token."""
        ids = tuple(self.tokenizer(sanitize_utf8(text)) for text in texts)
        needed = sum(tf.cast(s.row_lengths(), tf.int32) for s in ids) + len(ids) + 1
        return self.preprocessor.packer(ids), needed > self.sequence_length


@dataclasses.dataclass
class TaskSignatures:
    serving_default: object  # function of named tf.string arguments
    serving_input_signature: list  # one tf.TensorSpec per argument
    encoder_inputs: object  # function(token_ids, segment_ids, padding_mask)
    encoder_input_signature: list
    warmup_inputs: dict  # argument name -> list of real example values


def register_task(name, model_class_names=()):
    def register(build):
        _TASKS[name] = (build, tuple(model_class_names))
        return build
    return register


def task_names():
    return sorted(_TASKS)


def task_for_model(model):
    """The registered task whose model class is (a base class of) type(model)."""
    class_names = [cls.__name__ for cls in type(model).__mro__]
    for name, (_, model_classes) in _TASKS.items():
        if any(c in model_classes for c in class_names):
            return name
    raise ValueError(
        f"Cannot tell which task a {type(model).__name__} serves. Pass task= one of "
        f"{task_names()} (the model must follow that task's input/output contract).")


def build_signatures(task, context):
    if task not in _TASKS:
        raise ValueError(f"Unknown task {task!r}; known tasks: {task_names()}.")
    return _TASKS[task][0](context)


def _encoder_inputs_signature(rank=2):
    shape = [None] * rank
    return [tf.TensorSpec(shape, tf.int32, name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")]


def _encoder_inputs(context, rank=2):
    def encoder_inputs(token_ids, segment_ids, padding_mask):
        outputs = context.call_model({"token_ids": token_ids, "segment_ids": segment_ids,
                                      "padding_mask": padding_mask})
        if not isinstance(outputs, dict):
            outputs = {"logits": outputs}
        return {name: tf.cast(value, tf.float32) for name, value in outputs.items()}
    return encoder_inputs, _encoder_inputs_signature(rank)


def _num_outputs(model):
    """model.num_classes, or the last dimension of the model's (single) output."""
    count = getattr(model, "num_classes", None)
    return int(count if count is not None else model.outputs[0].shape[-1])


def _labels(context, count):
    names = context.label_names or [str(i) for i in range(count)]
    if len(names) != count:
        raise ValueError(f"{len(names)} label names for a model with {count} outputs.")
    return tf.constant(names)


def _batch_tile(vector, batch):
    """[C] -> [B, C]: per-example copies so every output has the batch dimension."""
    return tf.tile(vector[None], [batch, 1])


def _trim_padding(packed):
    """Drops the padding columns that no row of the batch uses. The logits do not depend on
    them (the padding mask hides them), and a short request then costs a short model call:
    a 20-token sentence runs ~5x faster than when padded to sequence_length=128."""
    longest = tf.reduce_max(tf.reduce_sum(packed["padding_mask"], axis=1))
    longest = tf.maximum(longest, 2)  # [CLS] [SEP]; also keeps an empty batch well-formed
    return {name: value[:, :longest] for name, value in packed.items()}


# === tasks ===


@register_task("classifier", ["BertClassifier"])
def classifier(context):
    """Outputs: probabilities [B, C], label_names [B, C], predicted_label [B], logits [B, C],
    truncated [B]; with one output unit (regression): score [B], truncated [B].
    Option `pair=True`: inputs text_a and text_b instead of text."""
    num_classes = _num_outputs(context.model)

    def answer(text_batch, packed_and_truncated):
        packed, truncated = packed_and_truncated
        logits = tf.cast(context.call_model(_trim_padding(packed)), tf.float32)  # [B, C]
        if num_classes == 1:
            return {"score": logits[:, 0], "truncated": truncated}
        labels = _labels(context, num_classes)
        probabilities = tf.nn.softmax(logits, axis=-1)
        batch = tf.shape(logits)[0]
        return {"probabilities": probabilities, "logits": logits,
                "label_names": _batch_tile(labels, batch),
                "predicted_label": tf.gather(labels, tf.argmax(logits, axis=-1)),
                "truncated": truncated}

    encoder_inputs, encoder_signature = _encoder_inputs(context)
    if context.options.get("pair"):
        def serve(text_a, text_b):
            return answer(text_a, context.pack(text_a, text_b))
        return TaskSignatures(serve, [STRINGS, STRINGS], encoder_inputs, encoder_signature, {
            "text_a": ["A man is playing a guitar.", "The cat sleeps on the sofa."],
            "text_b": ["Someone plays an instrument.", "A dog runs in the park."]})

    def serve(text):
        return answer(text, context.pack(text))
    return TaskSignatures(serve, [STRINGS], encoder_inputs, encoder_signature, {
        "text": ["a gripping, beautifully acted film.", "the plot is thin and the jokes fall flat.",
                 ""]})


@register_task("span_labeler", ["BertSpanLabeler"])
def span_labeler(task):
    """Extractive QA. Inputs question, context. Outputs answer [B] (text of the context),
    start, end [B] character offsets (answer == context[start:end]), score [B] (start +
    end logit; NO_ANSWER_SCORE and "" when the context has no tokens).

    The context is covered by windows of `sequence_length - 3 - max_question_tokens`
    tokens every `doc_stride` tokens, so no part of a long context is ignored; the question
    keeps its first `max_question_tokens` tokens (default 64, at most a third of the row).
    Offsets refer to the context after ill-formed UTF-8 became U+FFFD (unchanged for valid
    UTF-8)."""
    length = task.sequence_length
    max_question = int(task.options.get("max_question_tokens", min(64, (length - 3) // 3)))
    window = length - 3 - max_question
    if max_question < 1 or window < 1:
        raise ValueError(f"sequence_length={length} leaves no room for a question and a "
                         f"context window (max_question_tokens={max_question}).")
    stride = int(task.options.get("doc_stride", max(1, min(128, window // 2))))
    max_answer = int(task.options.get("max_answer_tokens", 30))
    if not 1 <= stride <= window:
        raise ValueError(f"doc_stride must be in [1, {window}], got {stride}.")

    def serve(question, context):
        text = sanitize_utf8(context)
        question_ids = task.tokenizer(sanitize_utf8(question))[:, :max_question]
        ids, piece_starts, piece_ends = task.tokenizer.tokenize_with_offsets(text)
        windows = Windows(ids.row_lengths(), window, stride)
        window_question = tf.gather(question_ids, windows.example)  # [N, None]
        packed = task.preprocessor.packer((window_question, windows.gather(ids)))
        outputs = task.call_model(packed)
        context_begin = tf.cast(window_question.row_lengths(), tf.int64) + 2  # [CLS] q [SEP]
        score, start, end = best_spans(
            outputs["start_logits"], outputs["end_logits"], context_begin,
            windows.end - windows.start, max_answer)
        best = best_window(score, windows.row_splits)  # [B]
        score = tf.gather(score, best)
        found = score > NO_ANSWER_SCORE
        # token index into the flat pieces of the batch; a safe dummy when nothing was found
        base = tf.gather(ids.row_splits, tf.gather(windows.example, best))
        first = base + tf.gather(windows.start, best)
        begin_piece = tf.where(found, first + tf.gather(start, best), 0)
        end_piece = tf.where(found, first + tf.gather(end, best), 0)
        begin = tf.where(found, tf.gather(_padded(piece_starts.values), begin_piece), 0)
        end_byte = tf.where(found, tf.gather(_padded(piece_ends.values), end_piece), 0)
        answer = tf.strings.substr(text, begin, end_byte - begin, unit="BYTE")
        return {"answer": answer, "start": byte_to_char_offset(text, begin),
                "end": byte_to_char_offset(text, end_byte), "score": score}

    encoder_inputs, encoder_signature = _encoder_inputs(task)
    return TaskSignatures(serve, [STRINGS, STRINGS], encoder_inputs, encoder_signature, {
        "question": ["Who wrote the letter?", "Where did they meet?"],
        "context": ["The letter was written by Anna Karenina in Moscow.",
                         "They met in Paris in the spring of 1921, before the war."]})



def _padded(values):
    """values [P] + one 0 at the end, so index 0 is always valid, even for an empty batch."""
    return tf.concat([values, tf.zeros([1], values.dtype)], axis=0)


@register_task("token_classifier", ["BertTokenClassifier"])
def token_classifier(context):
    """Word-level tags. Input text. Outputs words [B, W] (the tokenizer's words: white space
    and punctuation split), tags [B, W] (the label of each word's first piece), tag_scores
    [B, W] (its probability), num_words [B]; rows are padded with "" / 0 after num_words.
    A text longer than the row is tagged in consecutive chunks of `sequence_length - 2`
    pieces, so every word gets a tag."""
    chunk = context.sequence_length - 2
    num_classes = _num_outputs(context.model)
    vocabulary = context.tokenizer.vocabulary

    def serve(text):
        text = sanitize_utf8(text)
        ids, piece_starts, piece_ends = context.tokenizer.tokenize_with_offsets(text)
        windows = Windows(ids.row_lengths(), chunk, chunk)
        logits = context.call_model(context.preprocessor.packer(windows.gather(ids)))
        # every piece -> (its window, its position there: after [CLS])
        piece_row = ids.value_rowids()
        index_in_row = tf.ragged.range(ids.row_lengths()).values
        window = tf.gather(windows.first_window, piece_row) + index_in_row // chunk
        position = 1 + index_in_row % chunk
        piece_logits = tf.gather_nd(tf.cast(logits, tf.float32),
                                    tf.stack([window, position], axis=1))  # [P, C]
        starts = word_starts(ids, vocabulary)
        word_of_piece, word_row, word_begin, word_end = group_words(
            starts, piece_starts, piece_ends)
        first_piece = tf.where(starts.values)[:, 0]
        probabilities = tf.nn.softmax(tf.gather(piece_logits, first_piece), axis=-1)  # [W, C]
        labels = _labels(context, num_classes)
        batch = tf.shape(text, out_type=tf.int64)[0]

        def per_example(values, default):
            ragged = tf.RaggedTensor.from_value_rowids(values, word_row, nrows=batch)
            return ragged.to_tensor(default)

        words = tf.strings.substr(tf.gather(text, word_row), word_begin, word_end - word_begin,
                                  unit="BYTE")
        return {"words": per_example(words, ""),
                "tags": per_example(tf.gather(labels, tf.argmax(probabilities, axis=-1)), ""),
                "tag_scores": per_example(tf.reduce_max(probabilities, axis=-1), 0.0),
                "num_words": tf.math.bincount(word_row, minlength=batch, maxlength=batch,
                                              dtype=tf.int64)}

    encoder_inputs, encoder_signature = _encoder_inputs(context)
    return TaskSignatures(serve, [STRINGS], encoder_inputs, encoder_signature, {
        "text": ["Barack Obama visited Paris on Monday .", "i love new york city !!"]})


@register_task("multiple_choice", ["BertMultipleChoice"])
def multiple_choice(context):
    """Inputs question [B], choices [B, C]. Outputs scores [B, C] (logits), probabilities
    [B, C], predicted_choice [B] (index), truncated [B, C]."""

    def serve(question, choices):
        batch = tf.shape(choices)[0]
        num_choices = tf.shape(choices)[1]
        packed, truncated = context.pack(tf.repeat(question, num_choices),
                                         tf.reshape(choices, [-1]))
        shape = [batch, num_choices, context.sequence_length]
        logits = context.call_model({name: tf.reshape(value, shape)
                                     for name, value in packed.items()})
        logits = tf.cast(logits, tf.float32)
        return {"scores": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
                "predicted_choice": tf.argmax(logits, axis=-1),
                "truncated": tf.reshape(truncated, [batch, num_choices])}

    encoder_inputs, encoder_signature = _encoder_inputs(context, rank=3)
    choices_spec = tf.TensorSpec([None, None], tf.string)
    return TaskSignatures(serve, [STRINGS, choices_spec], encoder_inputs, encoder_signature, {
        "question": ["Where do you keep milk cold?"],
        "choices": [["in the fridge", "in the oven", "on the roof", "in a book"]]})


def _embedding_task(output_names):
    def build(context):
        def serve(text):
            packed, truncated = context.pack(text)
            outputs = context.call_model(packed)
            result = {name: tf.cast(outputs[name], tf.float32) for name in output_names}
            result.update(padding_mask=packed["padding_mask"], truncated=truncated)
            return result

        encoder_inputs, encoder_signature = _encoder_inputs(context)
        return TaskSignatures(serve, [STRINGS], encoder_inputs, encoder_signature, {
            "text": ["A man is eating food.", "A man is riding a horse."]})
    return build


register_task("feature_extractor", ["BertFeatureExtractor"])(
    _embedding_task(["sentence_embedding", "token_embeddings"]))
register_task("encoder", ["BertEncoder"])(_embedding_task(["pooled_output", "sequence_output"]))
