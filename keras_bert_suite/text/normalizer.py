"""BERT text normalization in TensorFlow ops, matching Hugging Face `tokenizers`' BertNormalizer.

The reference runs, per character: clean text (drop NUL, U+FFFD and control/format/private-use
characters, map white space to " "), put spaces around CJK ideographs, and for uncased models
strip accents (NFD, drop non-spacing marks) and then lower-case (Rust `char::to_lowercase`).

Two implementations with the same result:

* `normalize_rows` works on whole strings with few big ops: one regex full match finds the
  rows it can do exactly, tf-text's FastBertNormalize (a per-code-point table: white space to
  " ", and NFKC case folding + accent stripping when uncased) normalizes them, and the
  characters cleaning removes are dropped first by a regex run only on the rows that have any.
  Exact rows are valid UTF-8 without the characters where FastBertNormalize disagrees with the
  reference (ligatures, full-width and other compatibility characters, ...) or where
  FastWordpiece's built-in word splitting would (see `char_tables.py`).
* `normalize_chars` normalizes each character on its own with ICU (NFD, drop marks, lower-case)
  and fixes the few characters where ICU's Unicode data differs from the reference's from a
  table. It is exact for every input and gives each output character's source span, which is
  how offsets into the original text are computed.

Two steps of the reference are not materialized, because the word splitters give the same
words without them: no spaces are inserted around CJK ideographs (both split each off as a
one-character word, like punctuation), and `normalize_chars` keeps white space characters as
they are (each one separates words). Offsets stay simpler that way.

Invalid UTF-8: `normalize_chars` decodes with replacement, so each ill-formed sequence becomes
U+FFFD, which cleaning then drops, as BERT drops U+FFFD; `normalize_rows` calls such rows inexact.

Known limit: neither path reorders a run of two or more combining marks that survive accent
stripping and are not in canonical order (rare marks of recent Unicode versions that the
reference does not count as non-spacing); the reference's NFD would reorder them.
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_suite.text import char_classes
from keras_bert_suite.text import ragged_rows
from keras_bert_suite.text import char_tables

NormalizedChars = collections.namedtuple("NormalizedChars", ["chars", "starts", "ends"])
NormalizedChars.__doc__ = """Per-character normalization of a batch of strings.

chars: [B, C] ragged strings, the normalized text of each original character ("" if dropped).
starts, ends: [B, C] ragged int64 byte offsets of each original character in the input.
"""


class BertNormalizer:
    """Holds the compiled tables (no variables); all methods take a 1-D string tensor [B]."""

    def __init__(self, lowercase):
        self.lowercase = lowercase
        excluded = (char_tables.FAST_PATH_EXCLUDED_UNCASED if lowercase
                    else char_tables.FAST_PATH_EXCLUDED_CASED)
        self._dropped_regex = char_classes.regex_class(char_tables.DROPPED)
        self._marks_regex = char_classes.regex_class(char_tables.STRIPPED_MARKS)
        # Positive classes of every allowed scalar value: they also reject ill-formed UTF-8.
        allowed = char_classes.valid_complement(excluded)
        self._fast_path_regex = char_classes.regex_class(allowed) + "*"
        self._clean_fast_path_regex = char_classes.regex_class(char_classes.valid_complement(
            char_classes.union(excluded, char_tables.DROPPED))) + "*"
        # Plain ASCII that cleaning keeps maps character for character (at most lower-cased).
        self._one_to_one_regex = char_classes.regex_class(
            char_classes.valid_complement(char_classes.union(
                char_tables.DROPPED, ((0x80, char_classes.MAX_CODE_POINT),)))) + "*"
        self._fast_normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=lowercase)
        overrides = char_tables.UNCASED_OVERRIDES if lowercase else {}
        self._override_code_points = np.array(sorted(overrides) or [-1], np.int32)
        self._override_values = np.array(
            [overrides[cp].encode("utf-8") for cp in sorted(overrides)] or [b""], object)
        self._ascii_results = np.array([self._normalize_ascii(cp) for cp in range(128)], object)

    def _normalize_ascii(self, cp):
        if char_classes.includes(char_tables.DROPPED, cp):
            return b""
        return (chr(cp).lower() if self.lowercase else chr(cp)).encode()

    # === whole rows ===

    def aligned_one_to_one(self, strings):
        """[B] bool: rows whose normalization keeps every byte in place (plain ASCII text)."""
        return tf.strings.regex_full_match(strings, self._one_to_one_regex)

    def normalize_rows(self, strings):
        """[B] strings -> (normalized [B], exact [B] bool): the whole-row route, and the rows
        where it equals the reference."""
        clean = tf.strings.regex_full_match(strings, self._clean_fast_path_regex)

        def drop_removed_characters():  # only rows with control/format characters, rare text
            rows = tf.where(~clean)[:, 0]
            unclean = tf.gather(strings, rows)
            exact = tf.tensor_scatter_nd_update(
                clean, rows[:, None], tf.strings.regex_full_match(unclean, self._fast_path_regex))
            # FastBertNormalize would turn control characters into spaces; the reference drops
            # them. (Not a regex over every row: that copies every string, and measured, RE2's
            # replace did not scale across parallel tf.data calls.)
            text = tf.tensor_scatter_nd_update(
                strings, rows[:, None], tf.strings.regex_replace(unclean, self._dropped_regex, ""))
            return text, exact

        text, exact = tf.cond(
            tf.reduce_all(clean), lambda: (strings, clean), drop_removed_characters)
        return self._fast_normalizer.normalize(text), exact

    def normalize_exactly(self, strings):
        """[B] normalized strings, exact for every row: the whole-row route where it is exact,
        the per-character route for the other rows."""
        normalized, exact = self.normalize_rows(strings)
        rows = tf.where(~exact)[:, 0]
        chars = self.normalize_chars(tf.gather(strings, rows)).chars
        return tf.tensor_scatter_nd_update(
            normalized, rows[:, None], tf.strings.reduce_join(chars, axis=-1))

    # === one character at a time ===

    def normalize_chars(self, strings):
        """Exact per-character normalization with source byte offsets (`NormalizedChars`)."""
        code_points, starts = tf.strings.unicode_decode_with_offsets(
            strings, "UTF-8", errors="replace", replacement_char=0xFFFD)
        flat = code_points.values  # [N] int32, every character of the batch
        is_ascii = flat < 128
        ascii_index = tf.where(is_ascii)[:, 0]
        other_index = tf.where(~is_ascii)[:, 0]
        # Most text is ASCII: a 128-entry table answers those without any string op.
        ascii_chars = tf.gather(tf.constant(self._ascii_results), tf.gather(flat, ascii_index))
        other_chars = self._normalize_code_points(tf.gather(flat, other_index))
        normalized = tf.dynamic_stitch(
            [tf.cast(ascii_index, tf.int32), tf.cast(other_index, tf.int32)],
            [ascii_chars, other_chars])
        normalized = tf.reshape(normalized, tf.shape(flat))  # keeps [0] for an empty batch
        chars = code_points.with_values(normalized)
        return NormalizedChars(chars, starts, character_ends(starts, strings))

    def _normalize_code_points(self, code_points):
        """[N] int32 code points (one character each) -> [N] normalized strings."""
        chars = tf.strings.unicode_encode(tf.expand_dims(code_points, -1), "UTF-8")
        if self.lowercase:
            chars = tf_text.normalize_utf8(chars, "NFD")
            chars = tf.strings.regex_replace(chars, self._marks_regex, "")
            chars = tf.strings.lower(chars, encoding="utf-8")
        chars = tf.where(char_classes.contains(code_points, char_tables.DROPPED), "", chars)
        keys = tf.constant(self._override_code_points)
        index = tf.minimum(tf.searchsorted(keys, code_points), len(self._override_code_points) - 1)
        is_override = tf.gather(keys, index) == code_points
        return tf.where(is_override, tf.gather(tf.constant(self._override_values), index), chars)


def character_ends(starts, strings):
    """End byte offset of each character: the next character's start, or the string's end."""
    flat_starts = starts.values
    row_ids = ragged_rows.value_rowids(starts)
    next_starts = tf.concat([flat_starts[1:], tf.zeros([1], flat_starts.dtype)], axis=0)[
        : tf.shape(flat_starts)[0]]
    last_in_row = tf.range(tf.shape(flat_starts, out_type=tf.int64)[0]) == (
        tf.gather(starts.row_splits[1:], row_ids) - 1)
    string_ends = tf.gather(tf.strings.length(strings, unit="BYTE"), row_ids)
    ends = tf.where(last_in_row, tf.cast(string_ends, flat_starts.dtype), next_starts)
    return starts.with_values(ends)
