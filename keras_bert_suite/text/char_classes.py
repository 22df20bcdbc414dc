"""Code point range tables -> RE2 character classes and in-graph membership tests."""

import numpy as np
import tensorflow as tf

MAX_CODE_POINT = 0x10FFFF
SURROGATES = ((0xD800, 0xDFFF),)


def union(*tables):
    """Sorted, merged union of several range tables."""
    ranges = sorted(r for table in tables for r in table)
    merged = []
    for first, last in ranges:
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)


def valid_complement(table):
    """Every Unicode scalar value (no surrogates) that is not in `table`."""
    excluded = union(table, SURROGATES)
    out, start = [], 0
    for first, last in excluded:
        if first > start:
            out.append((start, first - 1))
        start = last + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def regex_class(table):
    """An RE2 class such as `[\\x{41}-\\x{5A}\\x{61}]`.

    A positive class built from explicit ranges also rejects ill-formed UTF-8 (stray bytes,
    overlong forms, encoded surrogates): RE2 compiles it into exact byte sequences.
    """
    parts = [f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in table]
    return "[" + "".join(parts) + "]"


def includes(table, code_point):
    """Python-side `code_point in table`."""
    return any(first <= code_point <= last for first, last in table)


def contains(code_points, table):
    """Elementwise `code point in table` for an int32 tensor (binary search, no regex)."""
    firsts = tf.constant(np.array([a for a, _ in table], np.int32))
    lasts = tf.constant(np.array([b for _, b in table], np.int32))
    flat = tf.reshape(code_points, [-1])
    index = tf.searchsorted(firsts, flat, side="right") - 1  # last range starting <= cp
    safe_index = tf.maximum(index, 0)
    inside = (index >= 0) & (flat <= tf.gather(lasts, safe_index))
    return tf.reshape(inside, tf.shape(code_points))
