"""Regenerates `char_tables.py` by probing every Unicode code point (a developer tool).

    python -m keras_bert_suite.text.generate_char_tables

Why probe instead of reading the Unicode standard: the reference we match is the Hugging Face
`tokenizers` BERT normalizer and pre-tokenizer, whose Rust crates carry Unicode data of
different (older) versions than Python's `unicodedata` and TensorFlow's ICU. Asking the
reference about each code point gives its tables exactly; asking TensorFlow's ops about the
same code point shows where our in-graph pipeline would disagree, and those few characters get
an explicit per-character answer (`UNCASED_OVERRIDES`, for the exact per-character path) or
are kept off the fast path (FastBertNormalize + FastWordpiece's own word splitting).

Needs `tokenizers` (a test dependency), TensorFlow and tensorflow-text; takes ~1 minute.
"""

import os
import sys

OUTPUT = os.path.join(os.path.dirname(__file__), "char_tables.py")


def _code_points():
    return [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]


def _ranges(code_points):
    out = []
    for cp in sorted(code_points):
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return tuple((a, b) for a, b in out)


def _hf_classes(code_points):
    """Dropped, whitespace, CJK and punctuation sets as the `tokenizers` BERT classes see them."""
    from tokenizers import normalizers, pre_tokenizers

    clean = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    cjk = normalizers.BertNormalizer(
        clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    pre = pre_tokenizers.BertPreTokenizer()
    dropped, whitespace, chinese, punctuation = set(), set(), set(), set()
    for cp in code_points:
        c = chr(cp)
        if clean.normalize_str("a" + c + "b") == "ab":
            dropped.add(cp)
        if cjk.normalize_str("a" + c + "b") == f"a {c} b":
            chinese.add(cp)
        words = [w for w, _ in pre.pre_tokenize_str("a" + c + "b")]
        if words == ["a", "b"]:
            whitespace.add(cp)
        elif words == ["a", c, "b"]:
            punctuation.add(cp)
    return dropped, whitespace, chinese, punctuation


def _hf_stripped_marks(code_points):
    """Characters that strip_accents removes after NFD (the reference's 'Mn' table)."""
    import unicodedata

    from tokenizers import normalizers

    strip = normalizers.BertNormalizer(
        clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    return {cp for cp in code_points
            if unicodedata.normalize("NFD", chr(cp)) == chr(cp) and strip.normalize_str(chr(cp)) == ""}


def _regex_class(ranges):
    return "[" + "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                         for a, b in ranges) + "]"


def _uncased_overrides(code_points, dropped, marks):
    """{code point: reference result} where NFD -> drop marks -> ICU lower-case differs."""
    import tensorflow as tf
    import tensorflow_text as tf_text
    from tokenizers import normalizers

    reference = normalizers.BertNormalizer(
        clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=True)
    kept = [cp for cp in code_points if cp not in dropped]
    strings = tf.constant([chr(cp).encode() for cp in kept])
    ours = tf_text.normalize_utf8(strings, "NFD")
    ours = tf.strings.regex_replace(ours, _regex_class(_ranges(marks)), "")
    ours = tf.strings.lower(ours, encoding="utf-8").numpy()
    overrides = {}
    for cp, got in zip(kept, ours):
        want = reference.normalize_str(chr(cp))
        if got.decode("utf-8") != want:
            overrides[cp] = want
    return overrides


def _fast_wordpiece_classes(code_points):
    """How FastWordpieceTokenizer's built-in pre-tokenization classifies each character."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    splitter = tf_text.FastWordpieceTokenizer(
        ["[UNK]", "a", "##a"], token_out_type=tf.int32, no_pretokenization=False,
        max_bytes_per_word=1000)
    pieces = splitter.tokenize(tf.constant([("a" + chr(cp) + "a").encode() for cp in code_points]))
    counts = pieces.row_lengths().numpy()
    # 1 piece: part of the word ("a?a" -> [UNK]); 2: whitespace; 3: punctuation ("a", "?", "a").
    # ("aaa" itself is a, ##a, ##a: the letter a is simply a letter.)
    whitespace = {cp for cp, n in zip(code_points, counts) if n == 2}
    punctuation = {cp for cp, n in zip(code_points, counts) if n == 3 and cp != ord("a")}
    return whitespace, punctuation


def _fast_bert_normalizer_disagreements(code_points, dropped, whitespace, lowercase):
    """Characters where tf-text's FastBertNormalize, run on text whose dropped characters are
    already gone, tokenizes differently from the reference normalizer.

    FastBertNormalize maps each code point on its own (NFKC case folding when lower-casing,
    control characters to spaces), so comparing "a{c}b" for every kept c decides it.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text
    from tokenizers import normalizers

    reference = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=lowercase, lowercase=lowercase)
    fast = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=lowercase)
    kept = [cp for cp in code_points if cp not in dropped]
    texts = [f"a{chr(cp)}b" for cp in kept]
    ours = fast.normalize(tf.constant([t.encode() for t in texts])).numpy()

    def words(text):  # every white space character separates words alike
        return "".join(" " if ord(c) in whitespace else c for c in text)

    return {cp for cp, text, got in zip(kept, texts, ours)
            if words(got.decode("utf-8")) != words(reference.normalize_str(text))}


def generate():
    import tensorflow_text
    import tokenizers

    code_points = _code_points()
    print("probing the reference classes ...", file=sys.stderr)
    dropped, whitespace, chinese, punctuation = _hf_classes(code_points)
    marks = _hf_stripped_marks(code_points)
    print("probing TensorFlow's normalization ...", file=sys.stderr)
    overrides = _uncased_overrides(code_points, dropped, marks)
    fwp_whitespace, fwp_punctuation = _fast_wordpiece_classes(code_points)
    disagreeing = (fwp_whitespace ^ whitespace) | (fwp_punctuation ^ (punctuation | chinese))
    fast_uncased = _fast_bert_normalizer_disagreements(code_points, dropped, whitespace, True)
    fast_cased = _fast_bert_normalizer_disagreements(code_points, dropped, whitespace, False)

    from tokenizers import normalizers

    def excluded(fast_disagreements, lowercase):
        reference = normalizers.BertNormalizer(
            clean_text=False, handle_chinese_chars=False, strip_accents=lowercase,
            lowercase=lowercase)
        split_differently = {
            cp for cp in code_points if cp not in dropped
            and any(ord(c) in disagreeing for c in reference.normalize_str(chr(cp)))}
        return fast_disagreements | split_differently

    slow_uncased = excluded(fast_uncased, True)
    slow_cased = excluded(fast_cased, False)

    def table(name, ranges, comment):
        body = "".join(f"    (0x{a:04X}, 0x{b:04X}),\n" for a, b in ranges)
        return f"# {comment}\n{name} = (\n{body})\n\n"

    text = (
        '"""Character tables of the Hugging Face BERT normalizer and pre-tokenizer.\n\n'
        "GENERATED by `python -m keras_bert_suite.text.generate_char_tables` from\n"
        f"tokenizers=={tokenizers.__version__} and tensorflow-text=={tensorflow_text.__version__}"
        "; do not edit by hand.\n"
        'Each table is a tuple of inclusive (first, last) code point ranges.\n"""\n\n'
        + table("DROPPED", _ranges(dropped),
                "Removed by clean_text: NUL, U+FFFD and the reference's control/format/private-use.")
        + table("WHITESPACE", _ranges(whitespace), "Word separators (Unicode White_Space).")
        + table("PUNCTUATION", _ranges(punctuation),
                "Split off as one-character words: ASCII symbols and Unicode P* (reference tables).")
        + table("CJK", _ranges(chinese),
                "CJK ideographs that become one-character words (the reference's ranges).")
        + table("STRIPPED_MARKS", _ranges(marks),
                "Removed after NFD when accents are stripped (the reference's Mn table).")
        + "# Uncased per-character results where TensorFlow's ICU (NFD, lower-case) disagrees\n"
        + "# with the reference's Rust Unicode data (characters from recent Unicode versions).\n"
        + "UNCASED_OVERRIDES = {\n"
        + "".join(f"    0x{cp:04X}: {want!r},\n" for cp, want in sorted(overrides.items()))
        + "}\n\n"
        + table("FAST_PATH_EXCLUDED_UNCASED", _ranges(slow_uncased),
                "Rows with these characters take the exact per-character path (uncased): where\n"
                "# FastBertNormalize (NFKC case folding) disagrees with the reference, and\n"
                "# characters whose normalization FastWordpiece splits differently.")
        + table("FAST_PATH_EXCLUDED_CASED", _ranges(slow_cased),
                "Same for cased text.")
    )
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")
    print(f"wrote {OUTPUT}: {len(overrides)} overrides, {len(slow_uncased)} uncased and "
          f"{len(slow_cased)} cased fast-path exclusions", file=sys.stderr)


if __name__ == "__main__":
    generate()
