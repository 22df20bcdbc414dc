"""MultipleChoicePreprocessor: (contexts [B], choices [B, C]) strings -> inputs [B, C, T].

The one packing of multiple choice: the tf.data training pipeline, `predict` on raw text and
the exported `serving_default` all call it. Each choice is packed with its context as
`[CLS] context [SEP] choice [SEP]`; by default a pair too long for the row loses tokens from
the longer segment first (Hugging Face's "longest_first", which trims the long context).
"""

import keras
import tensorflow as tf

from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager
from keras_bert_suite.text.preprocessing_layer import to_string_tensor
from keras_bert_suite.text.preprocessor import BertPreprocessor
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class MultipleChoicePreprocessor(BertPreprocessor):
    """Packs every (context, choice) pair.

    Args:
        tokenizer: a `BertTokenizer`, `BytePairTokenizer` or `SentencePieceTokenizer`.
        sequence_length: length of each packed pair.
        truncate: "longest_first" (default) or "round_robin" (see `SegmentPacker`).

    Call: `x = (contexts, choices)`: contexts [B] strings, choices [B, C] strings (every
    example has the same number of choices); optional `y` (the right choice [B]) and
    `sample_weight` pass through. Returns {"token_ids", "segment_ids", "padding_mask"} int32
    [B, C, sequence_length] (numpy eagerly, tensors inside tf.data).
    """

    def __init__(self, tokenizer, sequence_length=128, truncate="longest_first", **kwargs):
        super().__init__(tokenizer, sequence_length=sequence_length, truncate=truncate,
                         **kwargs)

    @tf.autograph.experimental.do_not_convert
    def call(self, x, y=None, sample_weight=None):
        packed, _ = self.pack_with_truncation(*_contexts_and_choices(x))
        return to_numpy_if_eager(keras.utils.pack_x_y_sample_weight(packed, y, sample_weight))

    @tf.autograph.experimental.do_not_convert
    def pack_with_truncation(self, contexts, choices):
        """-> (inputs [B, C, T], truncated [B, C] bool: the pair did not fit)."""
        contexts = to_string_tensor(contexts, "contexts")
        choices = to_string_tensor(choices, "choices")
        if contexts.shape.rank != 1 or choices.shape.rank != 2:
            raise ValueError(f"contexts must be [B] and choices [B, num_choices]; got shapes "
                             f"{contexts.shape} and {choices.shape}.")
        batch, num_choices = tf.shape(choices)[0], tf.shape(choices)[1]
        packed, truncated = super().pack_with_truncation(
            tf.repeat(contexts, num_choices), tf.reshape(choices, [-1]))  # [B·C, T]
        shape = [batch, num_choices, self.sequence_length]
        return ({name: tf.reshape(value, shape) for name, value in packed.items()},
                tf.reshape(truncated, [batch, num_choices]))

    @classmethod
    def from_preset(cls, preset, sequence_length=128, truncate="longest_first",
                    **tokenizer_kwargs):
        return cls(tokenizer_from_preset(preset, **tokenizer_kwargs), sequence_length,
                   truncate)


def _contexts_and_choices(x):
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError("Multiple-choice text input is a pair (contexts [B], choices [B, C]): "
                         "one context per example and num_choices choices for it.")
    return x
