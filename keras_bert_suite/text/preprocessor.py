"""BertPreprocessor: raw text (one segment or a pair) -> BertEncoder inputs; and
TokenizingPreprocessor, what every task preprocessor holds (tokenizer, row length, packer)."""

import keras
import tensorflow as tf

from keras_bert_suite.text.packer import SegmentPacker
from keras_bert_suite.text.packer import special_token_count
from keras_bert_suite.text.preprocessing_layer import STRINGS
from keras_bert_suite.text.preprocessing_layer import PreprocessingLayer
from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager
from keras_bert_suite.text.preprocessing_layer import to_string_tensor
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from keras_bert_suite.text.tokenizer_base import Tokenizer
from keras_bert_suite.text.utf8 import sanitize_utf8


class TokenizingPreprocessor(PreprocessingLayer):
    """Base of the preprocessors: a tokenizer (`BertTokenizer`, `BytePairTokenizer` or
    `SentencePieceTokenizer`), the packed `sequence_length` and a `SegmentPacker` in the
    tokenizer's layout; `get_config` / `from_config` carry the tokenizer. Subclasses add
    their own arguments to both."""

    def __init__(self, tokenizer, sequence_length, truncate="round_robin", **kwargs):
        super().__init__(**kwargs)
        if not isinstance(tokenizer, Tokenizer):
            raise ValueError("tokenizer must be a BertTokenizer, BytePairTokenizer or "
                             f"SentencePieceTokenizer, got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.packer = SegmentPacker(
            sequence_length, tokenizer.cls_token_id, tokenizer.sep_token_id,
            tokenizer.pad_token_id, truncate=truncate, layout=tokenizer.packer_layout)

    def get_config(self):
        config = super().get_config()
        config.update(tokenizer=keras.saving.serialize_keras_object(self.tokenizer),
                      sequence_length=self.sequence_length)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertPreprocessor(TokenizingPreprocessor):
    """Tokenizes and packs text into {"token_ids", "segment_ids", "padding_mask"}.

    Args:
        tokenizer: a `BertTokenizer`, `BytePairTokenizer` or `SentencePieceTokenizer` (its
            vocabulary needs the cls, sep and pad special tokens).
        sequence_length: length of the packed rows.
        truncate: "round_robin" or "longest_first" (see `SegmentPacker`).

    Call: `x` is strings ([B] or a scalar) or a tuple `(a, b)` of strings for sentence pairs;
    optional `y` and `sample_weight` pass through, so `ds.map(preprocessor)` works on
    `(text, label)` datasets. Returns the dict (or `(dict, y[, sample_weight])`): int32
    [B, sequence_length]; numpy arrays when called eagerly (e.g. on a Python list), tensors
    inside tf.data, whatever the Keras backend.

    For an unlabelled dataset of pairs, map `lambda a, b: preprocessor((a, b))`: two dataset
    components are otherwise read as (x, y).
    """

    def __init__(self, tokenizer, sequence_length=128, truncate="round_robin", **kwargs):
        super().__init__(tokenizer, sequence_length, truncate=truncate, **kwargs)
        self.truncate = truncate

    @tf.autograph.experimental.do_not_convert  # plain TF code
    def call(self, x, y=None, sample_weight=None):
        segments = x if isinstance(x, tuple) else (x,)  # a list is a batch of texts
        if len(segments) > 2:
            raise ValueError(f"BertPreprocessor takes one text or a pair (a, b); got "
                             f"{len(segments)} segments. Use SegmentPacker for more.")
        strings = tuple(to_string_tensor(s, "x") for s in segments)
        # one graph for tokenizing and packing (see PreprocessingLayer.compiled)
        packed = self.compiled(f"pack{len(strings)}", self._pack,
                               [STRINGS] * len(strings))(*strings)
        return to_numpy_if_eager(keras.utils.pack_x_y_sample_weight(packed, y, sample_weight))

    def _pack(self, *strings):
        return self.packer(tuple(self.tokenizer(s) for s in strings))

    @tf.autograph.experimental.do_not_convert
    def pack_with_truncation(self, *texts):
        """[B] strings (one segment or two) -> (packed inputs, [B] bool `truncated`: the row
        could not hold every token). What the exported raw-text signatures report."""
        strings = tuple(to_string_tensor(t, "text") for t in texts)
        return self.compiled(f"pack_with_truncation{len(strings)}", self._pack_with_truncation,
                             [STRINGS] * len(strings))(*strings)

    def _pack_with_truncation(self, *strings):
        ids = tuple(self.tokenizer(sanitize_utf8(s)) for s in strings)
        needed = sum(tf.cast(s.row_lengths(), tf.int32) for s in ids) + special_token_count(
            len(ids), self.packer.layout)
        return self.packer(ids), needed > self.sequence_length

    def get_config(self):
        return {**super().get_config(), "truncate": self.truncate}

    @classmethod
    def from_preset(cls, preset, sequence_length=128, truncate="round_robin", **tokenizer_kwargs):
        """The preset's tokenizer (see `tokenizer_from_preset`) with a packer."""
        tokenizer = tokenizer_from_preset(preset, **tokenizer_kwargs)
        return cls(tokenizer, sequence_length=sequence_length, truncate=truncate)

