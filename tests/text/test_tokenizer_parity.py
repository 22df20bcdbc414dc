"""Exact id (and offset) parity with Hugging Face `tokenizers` and `transformers` on real text,
hand-written hard cases and a sweep over Unicode, uncased (MiniLM vocab) and cased (a vocabulary
learned from SOTU by learn_vocabulary)."""

import pytest
import tokenizers
import transformers

from keras_bert_suite.text import BertTokenizer
from keras_bert_suite.text import char_tables

pytestmark = [pytest.mark.needs_tf_graph, pytest.mark.real]

HARD_CASES = [
    "", " ", "\t\n\r  ", "\u00a0\u2003\u3000",
    "Café déjà vu, naïve façade; Ångström & Œuvre", "cafe\u0301 decomposed e\u0301\u0301",
    "ÀÉÎÕÜ àéîõü ñ Ñ ç Ç ø Ø ß ẞ",
    "中文字符测试 and 日本語のテキスト and 한국어 텍스트",
    "emoji 😀👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ hi😀there ok",
    "controls\x00\x01\x07\x1b[0m \x7f\x85\x0b\x0c end",
    "bom\ufeffzero\u200bwidth\u200cnon\u200djoiner",
    "NBSP\u00a0thin\u2009narrow\u202fideographic\u3000line\u2028para\u2029end",
    "ligatures ﬁ ﬂ ﬀ ﬃ œ æ ĳ", "full-width Ｈｅｌｌｏ ＷＯＲＬＤ １２３ ！？",
    "Turkish İstanbul ıI iİ İ", "Greek ΟΔΟΣ Σίσυφος ς σ ΣΑΣ", "German STRASSE straße",
    "x" * 100, "x" * 101, "x" * 200, "x" * 201, "é" * 101, "é" * 201, "日" * 250,
    "ab" * 60 + " tail", "naïve" * 30,
    "α" * 150, "ж" * 90,  # within the character limit, over it in bytes
    "don't can't U.S.A. $3.14 50% #hashtag @user e-mail a/b {x} <tag> a_b ~ ^ `",
    "quotes “curly” ‘single’ — dash – en … ellipsis «guillemets» ¿qué? ¡sí!",
    "math ∑∫√∞≠≤ ±×÷ ° ℃ ™ © ® Ⅻ ⅻ ① ⁵ ₂ ½ 𝐀𝐚",
    "Arabic العربية Hebrew עברית Devanagari हिन्दी Thai ภาษาไทย",
    "soft\u00adhyphen rtl\u200f\u202emark tab\tseparated", "##prefix ## # [ ] [UNK",
    "\u1c89 \ua7cb \U00010570 \U00010d50 \U00011383 \U00016121",  # newer Unicode than ICU's
    "\U0002b820 \U0002b91f \U0002b81f \U0002b920",  # around the reference's CJK range gap
    "ǅ ǈ ǋ titlecase ῼ ᾈ",
]


def hf_wordpiece(vocabulary, lowercase, max_chars):
    tokenizer = tokenizers.BertWordPieceTokenizer(vocabulary, lowercase=lowercase)
    tokenizer._tokenizer.model.max_input_chars_per_word = max_chars
    return tokenizer


def hf_transformers(vocabulary, lowercase, max_chars):
    tokenizer = transformers.BertTokenizer(vocab=vocabulary, do_lower_case=lowercase)
    tokenizer.backend_tokenizer.model.max_input_chars_per_word = max_chars
    return tokenizer


def assert_parity(ours, texts, wordpiece, transformers_tokenizer=None):
    """Same ids on both of our routes, same ids and offsets as `tokenizers`, same ids as
    `transformers`."""
    encodings = wordpiece.encode_batch(texts, add_special_tokens=False)
    ids = ours.encode_batch(texts)
    ids_with_offsets, offsets = ours.encode_batch_with_offsets(texts)
    for i, (text, reference) in enumerate(zip(texts, encodings)):
        assert ids[i] == reference.ids, f"ids differ for {text!r}"
        assert ids_with_offsets[i] == reference.ids, f"offset route ids differ for {text!r}"
        assert offsets[i] == reference.offsets, f"offsets differ for {text!r}"
    if transformers_tokenizer is not None:
        expected = transformers_tokenizer(texts, add_special_tokens=False)["input_ids"]
        mismatched = [t for t, a, b in zip(texts, ids, expected) if a != b]
        assert not mismatched, f"transformers differs on {mismatched[:3]!r}"


@pytest.fixture(scope="module")
def cased_tokenizer(cased_sotu_vocab):
    return BertTokenizer(cased_sotu_vocab, lowercase=False)


def test_uncased_sotu(sotu_sentences, minilm_vocab, uncased_tokenizer):
    assert len(sotu_sentences) > 3000
    assert_parity(uncased_tokenizer, sotu_sentences, hf_wordpiece(minilm_vocab, True, 100),
                  hf_transformers(minilm_vocab, True, 100))


def test_cased_sotu(sotu_sentences, cased_sotu_vocab, cased_tokenizer):
    assert_parity(cased_tokenizer, sotu_sentences, hf_wordpiece(cased_sotu_vocab, False, 100),
                  hf_transformers(cased_sotu_vocab, False, 100))


@pytest.mark.parametrize("lowercase", [True, False])
def test_hard_cases(minilm_vocab, cased_sotu_vocab, uncased_tokenizer, cased_tokenizer, lowercase):
    vocabulary = minilm_vocab if lowercase else cased_sotu_vocab
    ours = uncased_tokenizer if lowercase else cased_tokenizer
    assert_parity(ours, HARD_CASES, hf_wordpiece(vocabulary, lowercase, 100),
                  hf_transformers(vocabulary, lowercase, 100))


def test_hard_cases_with_google_bert_word_limit(minilm_vocab):
    """max_input_chars_per_word=200, google-research/bert's own, both sides."""
    ours = BertTokenizer(minilm_vocab, max_input_chars_per_word=200)
    assert_parity(ours, HARD_CASES, hf_wordpiece(minilm_vocab, True, 200),
                  hf_transformers(minilm_vocab, True, 200))


def test_transformers_from_pretrained_minilm(minilm_dir, uncased_tokenizer, sotu_sentences):
    """The real checkpoint's own tokenizer files as transformers reads them: words over 100
    characters are [UNK] on both sides (a 120-character word among them)."""
    reference = transformers.BertTokenizer.from_pretrained(minilm_dir)
    texts = sotu_sentences[:500] + HARD_CASES + ["a " + "supercalifragilistic" * 6 + " word"]
    assert uncased_tokenizer.encode_batch(texts) == reference(
        texts, add_special_tokens=False)["input_ids"]


def sweep_code_points():
    """Every table boundary (+-1), every override, and an even sample of all of Unicode."""
    tables = (char_tables.DROPPED, char_tables.WHITESPACE, char_tables.PUNCTUATION,
              char_tables.CJK, char_tables.STRIPPED_MARKS, char_tables.FAST_PATH_EXCLUDED_UNCASED,
              char_tables.FAST_PATH_EXCLUDED_CASED)
    points = set(range(0, 0x110000, 53)) | set(char_tables.UNCASED_OVERRIDES)
    for table in tables:
        for first, last in table:
            points |= {first - 1, first, first + 1, last - 1, last, last + 1}
    return [chr(cp) for cp in sorted(points) if 0 <= cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF]


@pytest.mark.parametrize("lowercase", [True, False])
def test_unicode_sweep(minilm_vocab, cased_sotu_vocab, uncased_tokenizer, cased_tokenizer,
                       lowercase):
    """Each character alone and inside a word, so every class (dropped, space, punctuation,
    CJK, mark, letter) and every fast-path exclusion is exercised. (Every code point, not a
    sample, was checked the same way when the tables were generated; ~1 minute.)"""
    vocabulary = minilm_vocab if lowercase else cased_sotu_vocab
    ours = uncased_tokenizer if lowercase else cased_tokenizer
    texts = [f"The {c}x A{c}{c}b {c}" for c in sweep_code_points()]
    assert len(texts) > 20000
    assert_parity(ours, texts, hf_wordpiece(vocabulary, lowercase, 100))
