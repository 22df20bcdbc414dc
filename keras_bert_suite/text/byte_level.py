"""Byte-level pre-tokenization (GPT-2, RoBERTa): text -> words with byte offsets, and the
byte -> printable-character table that byte-level BPE vocabularies are written in.

The split is `tokenizers`' ByteLevel pre-tokenizer regex,

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

computed with RE2 (tf-text's `RegexSplitWithOffsets`), which has no look-ahead. The
`\\s+(?!\\S)` rule only decides what happens to a white-space run W before a non-space
character: W minus its last character is one word, and that last character is either the
leading space of the next word (when it is U+0020, the ` ?` of the next rule) or a word of its
own. ASCII rows take one pass of the rules followed by `[ws]+`, and such runs are then cut
that way. The exact route (`_split`) first splits the text into white-space runs and the
runs between them, then each run between by the rules, starting one byte early when it
inherits a space; it serves the rows one pass gets wrong (a contraction after two white-space
characters: " 's" is then not "'s") and the rows that are not ASCII. No marker characters are
inserted, so no user text can collide with them.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_suite.text import ragged_rows
from keras_bert_suite.text import row_routing
from keras_bert_suite.text.utf8 import is_ascii

_CONTRACTIONS = "'s|'t|'re|'ve|'m|'ll|'d"
_ASCII_SPACE_CHARS = r"\t\n\x{0b}\x{0c}\r "
# Unicode White_Space, what the reference's `\s` matches (RE2's `\s` is ASCII only).
SPACE_CHARS = (_ASCII_SPACE_CHARS + r"\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
               r"\x{202f}\x{205f}\x{3000}")


class _Rules:
    """The regexes of one character repertoire: RE2 runs the Unicode classes 3x slower, so
    rows of ASCII text take the classes' ASCII parts, which decide the same for them."""

    def __init__(self, space, letter, number):
        self.space_run = f"[{space}]+"
        self.word = (f"{_CONTRACTIONS}| ?[{letter}]+| ?[{number}]+"
                     f"| ?[^{space}{letter}{number}]+")


# A white-space character, then a space and a contraction: the one pass splits it wrongly.
_CONTRACTION_AFTER_SPACES = f"(?s).*[{_ASCII_SPACE_CHARS}] (?:{_CONTRACTIONS}).*"
_UNICODE = _Rules(SPACE_CHARS, r"\p{L}", r"\p{N}")
_ASCII = _Rules(_ASCII_SPACE_CHARS, "A-Za-z", "0-9")


def byte_to_unicode():
    """The 256 bytes -> 256 printable characters of GPT-2's vocabularies (printable Latin-1
    bytes stand for themselves, the rest are shifted to U+0100 and up: " " -> "Ġ")."""
    kept = set(range(ord("!"), ord("~") + 1)) | set(range(ord("¡"), ord("¬") + 1)) | set(
        range(ord("®"), ord("ÿ") + 1))
    table, shifted = {}, 0
    for byte in range(256):
        if byte in kept:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


def split_words(text):
    """[B] valid UTF-8 strings -> (words, starts, ends): [B, None] ragged, byte offsets."""
    # tf-text's regex split stops at a NUL byte; U+0001 falls under the same rule (neither
    # space, letter nor number), so the boundaries are the same. Words are cut from `text`.
    splittable = tf.strings.regex_replace(text, r"\x00", "\x01")
    starts, ends = _split_ascii_one_pass(splittable)
    # Two passes where one cannot do: a contraction after two white-space characters, and
    # rows that are not ASCII (their white space may be several bytes).
    not_ascii = ~is_ascii(text)
    starts, ends = row_routing.replace_rows(
        (starts, ends), tf.strings.regex_full_match(text, _CONTRACTION_AFTER_SPACES) & ~not_ascii,
        lambda rows: _split(tf.gather(splittable, rows), _ASCII))
    starts, ends = row_routing.replace_rows(
        (starts, ends), not_ascii, lambda rows: _split(tf.gather(splittable, rows), _UNICODE))
    words = tf.strings.substr(tf.gather(text, ragged_rows.value_rowids(starts)), starts.values,
                              ends.values - starts.values)
    return starts.with_values(words), starts, ends


def _split_ascii_one_pass(text):
    """[B] ASCII strings -> starts, ends [B, None], with one regex pass: the word rules, then
    white-space runs. Where a run of two or more white-space characters precedes a word, the
    pass kept it whole; its last character is split off and, if it is a space, given to the
    word (which the pass matched the same way without it, unless it is a contraction: those
    rows take `_split`)."""
    pattern = f"{_ASCII.word}|{_ASCII.space_run}"
    tokens, starts, ends = tf_text.regex_split_with_offsets(text, pattern, pattern)  # [B, T]
    row = ragged_rows.value_rowids(starts)
    start, end = starts.values, ends.values
    last = tf.strings.substr(tf.gather(text, row), end - 1, tf.ones_like(end))
    is_space = tf.strings.regex_full_match(last, _ASCII.space_run)  # a word never ends in one
    head_end, own_last, gives_space = _cut_space_runs(row, end, last, is_space)
    start = tf.where(tf.concat([[False], gives_space[:-1]], axis=0), start - 1, start)
    spans = tf.ragged.boolean_mask(  # [T, 0..2]: the token (or its head), then a last character
        tf.stack([tf.stack([start, head_end], 1), tf.stack([head_end, end], 1)], 1),
        tf.stack([head_end > start, own_last], 1))
    per_row = tf.math.unsorted_segment_sum(spans.row_lengths(), row, tokens.nrows())
    as_ragged = lambda values: tf.RaggedTensor.from_row_lengths(values, per_row, validate=False)
    return as_ragged(spans.values[:, 0]), as_ragged(spans.values[:, 1])


def _split(text, rules):
    """[B] strings -> starts, ends [B, None]: the byte span of every word."""
    runs, run_starts, run_ends = tf_text.regex_split_with_offsets(
        text, rules.space_run, rules.space_run)  # [B, R]: white space and what lies between
    # Runs alternate between white space and text, so each row's first character decides.
    row = ragged_rows.value_rowids(runs)
    first_char = tf.strings.substr(text, 0, 1, unit="UTF8_CHAR")
    row_starts_with_space = tf.strings.regex_full_match(first_char, rules.space_run)  # [B]
    odd = tf.equal(tf.ragged.range(runs.row_lengths()).values % 2, 1)
    is_space = tf.not_equal(tf.gather(row_starts_with_space, row), odd)  # [R]
    last = tf.strings.substr(runs.values, -1, 1, unit="UTF8_CHAR")
    starts, ends = run_starts.values, run_ends.values
    head_end, own_last, gives_space = _cut_space_runs(row, ends, last, is_space)
    inherits_space = tf.concat([[False], gives_space[:-1]], axis=0) & ~is_space
    text_starts = tf.where(inherits_space, starts - 1, starts)
    space_words = tf.ragged.boolean_mask(  # [R, 0..2]: the head, then the last character
        tf.stack([tf.stack([starts, head_end], 1), tf.stack([head_end, ends], 1)], 1),
        tf.stack([is_space & (head_end > starts), own_last], 1))
    space_run = ragged_rows.value_rowids(space_words)

    # The runs between white space, split by the rules (from the inherited space, if any).
    text_run = tf.where(~is_space)[:, 0]
    text_start = tf.gather(text_starts, text_run)
    pieces = tf.strings.substr(tf.gather(text, tf.gather(row, text_run)), text_start,
                               tf.gather(ends, text_run) - text_start)
    _, word_starts, word_ends = tf_text.regex_split_with_offsets(pieces, rules.word, rules.word)
    piece = ragged_rows.value_rowids(word_starts)
    offset = tf.gather(text_start, piece)
    text_words = tf.stack([offset + word_starts.values, offset + word_ends.values], 1)

    # A run holds either space words or text words: each goes to its run's place, in order.
    words = tf.concat([space_words.values, text_words], axis=0)  # [N, 2] byte spans
    word_run = tf.concat([space_run, tf.gather(text_run, piece)], axis=0)
    index_in_run = tf.concat([_index_in_row(space_words, space_run),
                              _index_in_row(word_starts, piece)], axis=0)
    per_run = tf.math.unsorted_segment_sum(tf.ones_like(word_run), word_run, tf.size(row))
    run_first = tf.cumsum(per_run, exclusive=True)
    words = tf.scatter_nd((tf.gather(run_first, word_run) + index_in_run)[:, None], words,
                          tf.shape(words, out_type=tf.int64))
    per_row = tf.math.unsorted_segment_sum(per_run, row, runs.nrows())
    as_ragged = lambda values: tf.RaggedTensor.from_row_lengths(values, per_row, validate=False)
    return as_ragged(words[:, 0]), as_ragged(words[:, 1])


def _cut_space_runs(row, ends, last, is_space):
    """The rule look-ahead decides, for spans [N] in text order with rows `row`, ends `ends`,
    last characters `last` and `is_space` marking white-space runs: a run followed by a word
    in its row keeps all but its last character (up to `head_end`); the last one is a word of
    its own (`own_last`) or, if it is a space, the next word's (`gives_space`)."""
    has_next = tf.concat([tf.equal(row[1:], row[:-1]), [False]], axis=0)
    splits_off_last = is_space & has_next
    gives_space = splits_off_last & tf.equal(last, " ")
    head_end = tf.where(splits_off_last, ends - tf.cast(tf.strings.length(last), ends.dtype), ends)
    return head_end, splits_off_last & ~gives_space, gives_space


def _index_in_row(ragged, rowids):
    """[N] the position of each value of a [R, None] ragged tensor in its row."""
    splits = tf.cast(ragged.row_splits, tf.int64)
    return tf.range(tf.size(rowids, out_type=tf.int64)) - tf.gather(splits, rowids)
