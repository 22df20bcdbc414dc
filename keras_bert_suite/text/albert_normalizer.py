"""ALBERT's text normalization before SentencePiece, per character, with source offsets.

transformers' AlbertTokenizer (and google-research/albert's `preprocess_text`) replace `` and
'' by ", decompose (NFKD), drop non-spacing marks (accents) and lower-case, before the
SentencePiece model's own normalization. Each original character is normalized on its own
(as `tokenizers` does: its Lowercase maps one character at a time), which also says which
original bytes every normalized byte came from (`NormalizedChars`, for offsets).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_suite.text import ragged_rows
from keras_bert_suite.text import runs
from keras_bert_suite.text.normalizer import NormalizedChars
from keras_bert_suite.text.normalizer import character_ends
from keras_bert_suite.text.utf8 import is_ascii


def lower_casing_is_enough(strings):
    """[B] bool: rows of ASCII without `` or '', which the normalization only lower-cases."""
    return is_ascii(strings) & ~tf.strings.regex_full_match(strings, r"(?s).*(``|'').*")


def normalize_chars(strings):
    """[B] strings -> NormalizedChars: each character's normalized text and source span."""
    code_points, starts = tf.strings.unicode_decode_with_offsets(
        strings, "UTF-8", errors="replace", replacement_char=0xFFFD)
    flat = code_points.values  # [N]
    chars = tf.strings.unicode_encode(tf.expand_dims(flat, -1), "UTF-8")
    chars = tf.strings.lower(
        tf.strings.regex_replace(tf_text.normalize_utf8(chars, "NFKD"), r"\p{Mn}", ""),
        encoding="utf-8")
    chars = tf.where(flat == 0, "\x00", chars)  # ICU's lower-casing drops a lone NUL
    for quote in (ord("`"), ord("'")):
        first, second = _quote_pairs(flat, ragged_rows.value_rowids(code_points), quote)
        chars = tf.where(first, '"', tf.where(second, "", chars))
    return NormalizedChars(code_points.with_values(chars), starts,
                           character_ends(starts, strings))


def _quote_pairs(flat, row, quote):
    """Where "``" (or "''") is replaced: the first and the second character of each replaced
    pair, [N] bool each."""
    continues_row = tf.concat([[False], tf.equal(row[1:], row[:-1])], axis=0)
    is_quote = tf.equal(flat, quote)
    pair_start = is_quote & tf.concat([is_quote[1:] & continues_row[1:], [False]], axis=0)
    first = runs.every_other_in_runs(pair_start, continues_row)
    return first, tf.concat([[False], first[:-1]], axis=0)
