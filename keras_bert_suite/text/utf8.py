"""UTF-8 helpers for in-graph text work: valid strings, byte -> character offsets."""

import tensorflow as tf


def sanitize_utf8(text):
    """Replaces every ill-formed UTF-8 sequence by U+FFFD (the tokenizer's own rule), so byte
    offsets, substrings and character counts are taken on the same valid string."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD,
        replace_control_characters=False)


def is_ascii(text):
    """[B] bool: the string is ASCII (as many bytes as characters)."""
    return tf.strings.length(text) == tf.strings.length(text, unit="UTF8_CHAR")


def byte_to_char_offset(text, byte_offset):
    """text [B] valid UTF-8, byte_offset [B] -> [B] int64 character (code point) offsets."""
    prefix = tf.strings.substr(text, tf.zeros_like(byte_offset), byte_offset, unit="BYTE")
    return tf.cast(tf.strings.length(prefix, unit="UTF8_CHAR"), tf.int64)


def char_to_byte_offset(text, char_offset):
    """text [B] valid UTF-8, char_offset [B] -> [B] int64 byte offsets."""
    prefix = tf.strings.substr(text, tf.zeros_like(char_offset), char_offset, unit="UTF8_CHAR")
    return tf.cast(tf.strings.length(prefix, unit="BYTE"), tf.int64)
