"""DeBERTa-v3's text normalization before SentencePiece, as transformers 5's DebertaV2Tokenizer
runs it: every run of two or more white-space characters, and every \\n, \\r, \\t, becomes one
space; NFC; trailing white space goes. The SentencePiece model's own normalization rules are not
run (transformers 5 builds the tokenizer without them), so the model runs with the identity
normalizer and folds runs of spaces itself (`remove_extra_whitespaces`), as Metaspace's one
leading mark does.

Most text needs only \\n, \\r, \\t replaced by spaces byte for byte (`simple`): SentencePiece then
folds the runs, and its offsets stay offsets into the text. The rest (`needs_exact`: non-ASCII
text, or \\v and \\f, which only fold in runs) takes `exact`, the whole normalization, whose
offsets point into the normalized text.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_suite.text.byte_level import SPACE_CHARS
from keras_bert_suite.text.utf8 import is_ascii


def needs_exact(strings):
    """[B] bool: rows that `simple` would not normalize as transformers does."""
    return ~is_ascii(strings) | ~tf.strings.regex_full_match(strings, r"[^\x0b\x0c]*")


def simple(strings):
    """ASCII text without \\v, \\f: \\n, \\r, \\t as spaces (one byte each)."""
    return tf.strings.regex_replace(strings, r"[\t\n\r]", " ")


def exact(strings):
    """transformers' normalizer sequence: Replace(\\s{2,}|[\\n\\r\\t], " "), NFC, Strip(right)."""
    strings = tf.strings.regex_replace(strings, f"[{SPACE_CHARS}]{{2,}}|[\\n\\r\\t]", " ")
    strings = tf_text.normalize_utf8(strings, "NFC")
    return tf.strings.regex_replace(strings, f"[{SPACE_CHARS}]+$", "")
