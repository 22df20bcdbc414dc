"""Splits normalized text into words the way `tokenizers`' BertPreTokenizer does.

White space separates words and is dropped; every punctuation character (Unicode P* plus the
ASCII symbol ranges) and every CJK ideograph becomes a word of its own.
"""

import tensorflow_text as tf_text

from keras_bert_suite.text import char_classes
from keras_bert_suite.text import char_tables


class WordSplitter:
    def __init__(self):
        single_char_words = char_classes.regex_class(
            char_classes.union(char_tables.PUNCTUATION, char_tables.CJK))
        whitespace = char_classes.regex_class(char_tables.WHITESPACE)
        self._delimiter_regex = f"{whitespace}+|{single_char_words}"
        self._kept_delimiter_regex = single_char_words

    def split_with_offsets(self, text):
        """[B] strings -> words, start, end: [B, W] ragged (byte offsets into `text`)."""
        return tf_text.regex_split_with_offsets(
            text, self._delimiter_regex, self._kept_delimiter_regex)
