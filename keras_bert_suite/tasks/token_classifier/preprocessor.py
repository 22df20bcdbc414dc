"""TokenClassifierPreprocessor: words or raw text -> chunks the token classifier reads.

The one text path of token tagging: the training data, evaluation, `predict` on raw input
and the exported model all chunk here (TensorFlow + tf-text ops only).

```
words [B, W] (pre-split, e.g. CoNLL) ─tokenize each word─┐
text [B] ──tokenize with byte offsets, "##" joins words──┴─▶ pieces [B, P] + each word's
                                                              first piece ─▶ chunks of
                                                              sequence_length - 2 pieces:
                                                              [CLS] chunk [SEP] [PAD]...
```

A sentence longer than one row is cut into consecutive chunks, so every word is tagged,
whatever its length. A word's label sits on its first piece (Hugging Face's `word_ids()`
convention for pre-split words; the other pieces are labelled `IGNORE_LABEL`); a word that
tokenizes to nothing (only control or format characters) becomes one [UNK] piece, so it still
gets a label and a prediction. With pre-split words, a word is whatever the data calls a word
("don't" is one word of three pieces); from raw text, words are the tokenizer's (white space
and punctuation split them).
"""

import dataclasses

import keras
import tensorflow as tf

from keras_bert_suite.text.preprocessing_layer import to_numpy_if_eager
from keras_bert_suite.text.preprocessing_layer import to_string_tensor
from keras_bert_suite.text.preprocessor import TokenizingPreprocessor
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from keras_bert_suite.text.utf8 import sanitize_utf8
from keras_bert_suite.text.windows import Windows
from keras_bert_suite.text.words import group_words, word_starts
from keras_bert_suite.training.losses import IGNORE_LABEL


@dataclasses.dataclass
class TokenChunks:
    """The chunks of a batch of B sentences (N chunks, T = sequence_length, P pieces).

    inputs: {"token_ids", "segment_ids", "padding_mask"} int32 [N, T].
    labels: [N, T] int32 (a word's label at its first piece, IGNORE_LABEL elsewhere) or None.
    piece_chunk, piece_position: [P] int64 where every piece sits in the chunks.
    first_piece: [P] bool, the piece starts a word.
    word_row: [W] int64 the sentence of every word (words in order over the batch).
    num_words: [B] int64.
    words: [W] the words as text, or None for pre-split input (the caller has them).
    """

    inputs: dict
    labels: object
    piece_chunk: tf.Tensor
    piece_position: tf.Tensor
    first_piece: tf.Tensor
    word_row: tf.Tensor
    num_words: tf.Tensor
    words: object = None


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class TokenClassifierPreprocessor(TokenizingPreprocessor):
    """Chunks words (or raw text) for `BertTokenClassifier`.

    Args:
        tokenizer: a `BertTokenizer`, `BytePairTokenizer` or `SentencePieceTokenizer`.
        sequence_length: length of every chunk, [CLS] and [SEP] included.

    Call: `x` is pre-split words (a `tf.RaggedTensor` [B, None] of strings, or a list of
    lists of str) or raw text ([B] strings); optional `y`: label ids per word, [B, None]
    (pre-split words only). Returns the chunk inputs [N, T] (and `(inputs, labels [N, T])`
    with `y`), so `ds.map(preprocessor)` turns sentence batches into chunk batches for
    `fit`. `chunks()` also returns what the postprocessor needs.

    Example:
    >>> from keras_bert_suite import BertTokenizer
    >>> tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    >>> preprocessor = TokenClassifierPreprocessor(tokenizer, sequence_length=64)
    >>> inputs, labels = preprocessor([["Paris", "Hilton"]], y=[[1, 2]])
    >>> labels[0, :4]   # [CLS] paris hilton [SEP]
    array([-100, 1, 2, -100], dtype=int32)
    """

    def __init__(self, tokenizer, sequence_length=128, **kwargs):
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or \
                sequence_length < 3:
            raise ValueError(f"sequence_length must be an int >= 3 ([CLS], one piece, [SEP]), "
                             f"got {sequence_length!r}.")
        super().__init__(tokenizer, sequence_length, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def call(self, x, y=None, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("TokenClassifierPreprocessor cuts long sentences into several "
                             "rows; per-sentence sample_weight is not supported.")
        chunks = self.chunks(x, labels=y)
        return to_numpy_if_eager(chunks.inputs if y is None else (chunks.inputs, chunks.labels))

    def chunks(self, x, labels=None):
        """Pre-split words [B, None] or text [B] (+ label ids per word) -> `TokenChunks`."""
        words = as_words(x)
        if words is not None:
            pieces, first, word_row, num_words, word_text = self._word_pieces(words)
        else:
            if labels is not None:
                raise ValueError("Labels need pre-split words (a list of words per sentence, "
                                 "one label per word); raw text has no given words.")
            pieces, first, word_row, num_words, word_text = self._text_pieces(x)
        chunk = self.sequence_length - 2
        windows = Windows(pieces.row_lengths(), chunk, chunk)
        inputs = self.packer((windows.gather(pieces),))
        index_in_row = tf.ragged.range(pieces.row_lengths()).values  # [P]
        piece_chunk = (tf.gather(windows.first_window, pieces.value_rowids())
                       + index_in_row // chunk)
        piece_position = 1 + index_in_row % chunk  # after [CLS]
        chunk_labels = None
        if labels is not None:
            chunk_labels = self._labels(labels, words, pieces, first, windows)
        return TokenChunks(inputs, chunk_labels, piece_chunk, piece_position, first, word_row,
                           num_words, word_text)

    def _word_pieces(self, words):
        """words [B, W] -> (pieces [B, P], first_piece [P], word_row [W], num_words [B],
        None)."""
        pieces = self.tokenizer(sanitize_utf8(words.flat_values))  # [W_total, None]
        empty = tf.cast(pieces.row_lengths() == 0, tf.int64)
        unknown = tf.ragged.range(empty) * 0 + self.tokenizer.unknown_token_id  # [W_total, 0|1]
        pieces = tf.concat([pieces, tf.cast(unknown, pieces.dtype)], axis=1)
        first = tf.ragged.range(pieces.row_lengths()) == 0  # [W_total, None]
        by_sentence = tf.RaggedTensor.from_row_splits(pieces, words.row_splits)  # [B, W, None]
        return (by_sentence.merge_dims(1, 2), first.values, words.value_rowids(),
                words.row_lengths(), None)

    def _text_pieces(self, text):
        """text [B] -> (pieces [B, P], first_piece [P], word_row [W], num_words [B], words
        [W] strings)."""
        text = sanitize_utf8(to_string_tensor(text, "text"))
        if text.shape.rank != 1:
            raise ValueError(f"Raw text must be [B] strings, got shape {text.shape}.")
        pieces, piece_starts, piece_ends = self.tokenizer.tokenize_with_offsets(text)
        starts = word_starts(pieces, self.tokenizer)  # [B, None] bool
        _, word_row, word_begin, word_end = group_words(starts, piece_starts, piece_ends)
        batch = tf.shape(text, out_type=tf.int64)[0]
        num_words = tf.math.bincount(word_row, minlength=batch, maxlength=batch,
                                     dtype=tf.int64)
        words = tf.strings.substr(tf.gather(text, word_row), word_begin,
                                  word_end - word_begin, unit="BYTE")
        return pieces, starts.values, word_row, num_words, words

    def _labels(self, labels, words, pieces, first, windows):
        """Label ids per word [B, W] -> [N, T]: at each word's first piece, IGNORE elsewhere."""
        labels = tf.cast(_ragged(labels, tf.int32), tf.int32)
        if labels.shape.rank != 2:
            raise ValueError("Labels are one id per word: [B, None].")
        tf.debugging.assert_equal(labels.row_lengths(), words.row_lengths(),
                                  message="Give one label per word.")
        piece_label = tf.tensor_scatter_nd_update(
            tf.fill(tf.shape(first), IGNORE_LABEL), tf.where(first), labels.flat_values)
        per_chunk = windows.gather(pieces.with_values(piece_label))  # [N, None]
        cls = tf.fill([tf.shape(per_chunk.row_lengths())[0], 1], IGNORE_LABEL)
        return tf.concat([cls, per_chunk], axis=1).to_tensor(
            IGNORE_LABEL, shape=[None, self.sequence_length])

    @classmethod
    def from_preset(cls, preset, sequence_length=128, **tokenizer_kwargs):
        return cls(tokenizer_from_preset(preset, **tokenizer_kwargs), sequence_length)


def as_words(x):
    """Pre-split words as a [B, None] string RaggedTensor, or None when `x` is raw text.
    A dense [B, W] string tensor is words padded with "" (what TF Serving sends)."""
    if isinstance(x, tf.RaggedTensor):
        return x
    if isinstance(x, tf.Tensor):
        if x.shape.rank == 2:
            return tf.RaggedTensor.from_tensor(x, padding="")
        return None
    if isinstance(x, (list, tuple)) and x and all(isinstance(s, (list, tuple)) for s in x):
        return _ragged(x, tf.string)
    if getattr(x, "ndim", None) == 2:  # numpy [B, W]: sentences of equally many words
        return tf.RaggedTensor.from_tensor(tf.constant(x, tf.string), padding="")
    if hasattr(x, "dtype") and getattr(x, "ndim", 1) == 1 and len(x) and \
            isinstance(x[0], (list, tuple)):
        return _ragged(list(x), tf.string)
    return None


def _ragged(values, dtype):
    if isinstance(values, tf.RaggedTensor):
        return values
    if isinstance(values, tf.Tensor):
        return tf.RaggedTensor.from_tensor(values)
    values = [list(row) for row in values]
    return tf.ragged.constant(values, dtype=dtype, ragged_rank=1) if values else \
        tf.RaggedTensor.from_row_lengths(tf.zeros([0], dtype), tf.zeros([0], tf.int64))
