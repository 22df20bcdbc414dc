"""Byte-level BPE (RoBERTa) and SentencePiece (ALBERT, XLM-R) in TensorFlow ops: ids identical
to the references on all 63,559 State of the Union sentences, the WordPiece tests' hard cases
and a Unicode sweep; the same ids in tf.data, eagerly and from a SavedModel that passes the op
check; pairs packed as the families' transformers tokenizers pack them. The models are learned
from SOTU by `tokenizers` and `sentencepiece` (conftest.py)."""

import itertools
import json
import os
import unicodedata

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf
import tokenizers
import transformers

from keras_bert_suite.export.op_check import check_servable_ops
from keras_bert_suite.text import BertPreprocessor
from keras_bert_suite.text import byte_level
from keras_bert_suite.text import BytePairTokenizer
from keras_bert_suite.text import SentencePieceTokenizer
from tests.harness import run_preprocessor_test
from tests.conftest import albert_prenormalized
from tests.text.test_tokenizer_parity import HARD_CASES

pytestmark = [pytest.mark.needs_tf_graph, pytest.mark.real]

MODEL_FILES = {"albert": "spiece.model", "xlm_roberta": "sentencepiece.bpe.model"}
TRANSFORMERS_CLASSES = {"albert": transformers.AlbertTokenizer,
                        "xlm_roberta": transformers.XLMRobertaTokenizer}
# Served models must answer any bytes: invalid UTF-8 and NUL too.
FUZZ = HARD_CASES + ["\x00", "a\x00b", "<s>", "</s></s>", "<mask>", "[CLS] [MASK]"]


@pytest.fixture(scope="module")
def byte_pair(byte_pair_dir):
    return BytePairTokenizer.from_directory(byte_pair_dir)


@pytest.fixture(scope="module")
def byte_pair_reference(byte_pair_dir):
    """`tokenizers`' ByteLevelBPETokenizer on the same files (what transformers runs)."""
    return tokenizers.ByteLevelBPETokenizer(os.path.join(byte_pair_dir, "vocab.json"),
                                            os.path.join(byte_pair_dir, "merges.txt"))


@pytest.fixture(scope="module")
def sentencepiece_tokenizers(sentencepiece_dirs):
    return {style: SentencePieceTokenizer(os.path.join(directory, MODEL_FILES[style]), style=style)
            for style, directory in sentencepiece_dirs.items()}


def test_byte_pair_matches_tokenizers_on_every_sentence(byte_pair, byte_pair_reference,
                                                        byte_pair_dir, all_sotu_sentences):
    assert len(all_sotu_sentences) == 63559
    texts = all_sotu_sentences + HARD_CASES
    reference = byte_pair_reference.encode_batch(texts)
    ids, offsets = byte_pair.encode_batch_with_offsets(texts)
    assert [t for t, a, r in zip(texts, ids, reference) if a != r.ids] == []
    assert [t for t, a, r in zip(texts, offsets, reference) if a != r.offsets] == []
    # transformers' RobertaTokenizer runs the reference's `tokenizers` pipeline plus two parts
    # that leave these ids alone: its special tokens matched in the text (none is in the
    # corpus) and a post-processor that adds them (not asked for). So its ids are the
    # reference's on every sentence: checked part by part, and on a sample, instead of a
    # second pass of the same Rust code over the corpus (5 s of CPU).
    roberta = transformers.RobertaTokenizer.from_pretrained(byte_pair_dir)
    theirs, same = (json.loads(t.to_str()) for t in (roberta.backend_tokenizer,
                                                      byte_pair_reference))
    for part in ("normalizer", "pre_tokenizer", "model"):
        assert theirs[part] == same[part], part
    special = [token["content"] for token in theirs["added_tokens"]]
    assert "<s>" in special and not any(s in t for t in all_sotu_sentences for s in special)
    assert roberta(all_sotu_sentences[::50], add_special_tokens=False)["input_ids"] == (
        ids[:len(all_sotu_sentences):50])


def test_byte_pair_unicode_sweep(byte_pair, byte_pair_reference):
    """Every code point between letters, doubled and after a space: the regex classes (letter,
    number, white space) and the byte mapping agree with the reference's everywhere."""
    code_points = [c for c in range(1, 0x30000) if not 0xD800 <= c < 0xE000]
    texts = [f"a{chr(c)}b {chr(c)}{chr(c)}  {chr(c)}1" for c in code_points]
    ids = byte_pair.encode_batch(texts)
    expected = [e.ids for e in byte_pair_reference.encode_batch(texts)]
    assert [hex(c) for c, a, b in zip(code_points, ids, expected) if a != b] == []


def test_byte_pair_white_space_and_contraction_combinations(byte_pair, byte_pair_reference):
    """Every 4-part combination of white space, contractions, letters, digits and symbols
    (65,536 strings): where one regex pass suffices and where it needs the second, ids equal
    the reference's."""
    parts = ["a", " ", "  ", "\t", "\n", " \n", "\n ", "'s", "'ll", "'x", "1", "!!", "é",
             "\u3000", "", "'"]
    texts = ["".join(p) for p in itertools.product(parts, repeat=4)]
    expected = [e.ids for e in byte_pair_reference.encode_batch(texts)]
    assert [t for t, a, b in zip(texts, byte_pair.encode_batch(texts), expected) if a != b] == []


@pytest.mark.parametrize("text, words", [
    ("the nation", ["the", " nation"]),
    ("the  nation", ["the", " ", " nation"]),  # a run gives its last space to the next word
    ("the\n\nnation", ["the", "\n", "\n", "nation"]),  # a last character other than " "
    ("a \u3000b", ["a", " ", "\u3000", "b"]),
    ("  's", [" ", " '", "s"]),  # " 's" is not the contraction "'s"
    ("it's they'll  ", ["it", "'s", " they", "'ll", "  "]),
    ("<s>x\x00y", ["<", "s", ">", "x", "\x00", "y"]),  # special-token strings are text
])
def test_byte_level_words_by_hand(text, words):
    """The white-space rule that the RE2 split rebuilds without look-ahead."""
    split = byte_level.split_words(tf.constant([text]))[0].to_list()[0]
    assert [w.decode("utf-8") for w in split] == words
    reference = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    to_bytes = {c: b for b, c in byte_level.byte_to_unicode().items()}
    assert [bytes(to_bytes[c] for c in w).decode("utf-8")
            for w, _ in reference.pre_tokenize_str(text)] == words


def _visible(text):
    return "".join(c for c in text if unicodedata.category(c) != "Cc")


def _score(processor, pieces):
    return sum(processor.get_score(processor.piece_to_id(p)) for p in pieces)


@pytest.mark.parametrize("style", ["albert", "xlm_roberta"])
def test_sentencepiece_matches_sentencepiece_and_transformers(
        style, sentencepiece_tokenizers, sentencepiece_dirs, all_sotu_sentences):
    """Identical to the `sentencepiece` library on everything. transformers' Unigram differs
    from it in two known ways, each checked: between segmentations of equal score (it breaks
    ties differently) and on C0/C1 control characters; nowhere else."""
    ours = sentencepiece_tokenizers[style]
    directory = sentencepiece_dirs[style]
    texts = all_sotu_sentences + HARD_CASES
    ids, offsets = ours.encode_batch_with_offsets(texts)

    processor = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(directory, MODEL_FILES[style]))
    if style == "albert":
        expected = processor.encode([albert_prenormalized(t) for t in texts])
    else:  # fairseq's ids: unknown -> 3, the rest + 1
        expected = [[i + 1 if i else 3 for i in row] for row in processor.encode(texts)]
    assert [t for t, a, b in zip(texts, ids, expected) if a != b] == []

    # Its `tokenizers` backend's batch call: what __call__ runs, without building its dict of
    # lists (1 s of CPU here).
    reference = TRANSFORMERS_CLASSES[style].from_pretrained(directory).backend_tokenizer \
        .encode_batch(texts, add_special_tokens=False)
    their_ids, their_offsets = [e.ids for e in reference], [e.offsets for e in reference]
    ties, others = 0, []
    for text, a, b in zip(texts, ids, their_ids):
        if a == b:
            continue
        ours_pieces = [ours.id_to_token(i) for i in a]
        their_pieces = [ours.id_to_token(i) for i in b]
        if sorted(ours_pieces) != sorted(their_pieces) and not np.isclose(
                _score(processor, ours_pieces), _score(processor, their_pieces), rtol=1e-6):
            others.append(text)
        else:
            ties += 1
    assert ties <= len(texts) // 500, ties  # rare: 20-60 of 63,559 sentences
    assert all(any(unicodedata.category(c) == "Cc" for c in t) for t in others), others

    # Offsets on real text as transformers' (which leave out the space "▁" stands for), except
    # for a lone "▁" piece: ours covers the space, theirs the next character, and for control
    # characters SentencePiece drops: ours include them like the text around. (Next to the
    # characters SentencePiece's normalization rewrites, non-ASCII spaces and ligatures in
    # the hard cases, ours are SentencePiece's own alignment.)
    for text, a_ids, a, b_ids, b in zip(texts, ids, offsets, their_ids[:len(all_sotu_sentences)],
                                        their_offsets):
        if a_ids == b_ids and a != b:
            # Equal offsets first: the same span needs no look at its characters (5 million
            # pieces; comparing every one's visible text took most of this test's time).
            differ = [(ours.id_to_token(i), text[p[0]:p[1]], text[q[0]:q[1]])
                      for i, p, q in zip(a_ids, a, b) if tuple(p) != tuple(q)
                      and ours.id_to_token(i) != "\u2581"
                      and _visible(text[p[0]:p[1]]) != _visible(text[q[0]:q[1]])]
            assert differ == [], text


def test_sentencepiece_styles(sentencepiece_tokenizers):
    albert, xlm_roberta = sentencepiece_tokenizers["albert"], sentencepiece_tokenizers["xlm_roberta"]
    assert albert.get_vocabulary()[:5] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (albert.pad_token_id, albert.cls_token_id, albert.mask_token_id) == (0, 2, 4)
    vocabulary = xlm_roberta.get_vocabulary()
    assert vocabulary[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and vocabulary[-1] == "<mask>"
    assert len(vocabulary) == 3000 + 2  # fairseq's four first, the model's three dropped, <mask>
    # ALBERT's pre-normalization: `` '' -> ", accents stripped, lower case.
    pieces = lambda tokenizer, text: [tokenizer.id_to_token(i)
                                      for i in tokenizer.encode_batch([text])[0]]
    assert pieces(albert, "``Café''") == pieces(albert, '"cafe"')
    assert pieces(xlm_roberta, "[MASK] <s>") != pieces(xlm_roberta, "<mask> </s>")
    assert xlm_roberta.mask_token_id not in xlm_roberta.encode_batch(["<mask>"])[0]
    flags = albert.word_start_flags()
    assert flags[albert.token_to_id("\u2581the")] and not flags[albert.token_to_id("s")]


@pytest.mark.parametrize("which", ["byte_pair", "albert", "xlm_roberta"])
def test_tf_data_eager_and_served_ids_agree(which, byte_pair, sentencepiece_tokenizers,
                                            all_sotu_sentences, tmp_path):
    tokenizer = byte_pair if which == "byte_pair" else sentencepiece_tokenizers[which]
    texts = all_sotu_sentences[:300] + FUZZ
    eager = tokenizer.encode_batch(texts)
    in_tf_data = [row.tolist() for batch in
                  tf.data.Dataset.from_tensor_slices(texts).batch(64).map(tokenizer)
                  for row in batch.numpy()]
    assert in_tf_data == eager

    module = tf.Module()
    module.resources = tokenizer.trackables()
    module.tokenize = tf.function(lambda text: tokenizer(text).to_tensor(-1),
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    export_dir = str(tmp_path / which)
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.tokenize})
    check_servable_ops(export_dir)
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    inputs = [t.encode("utf-8") for t in texts] + [b"\xff\xfe bad \xc3", b"\xed\xa0\x80"]
    output = list(served(tf.constant(inputs)).values())[0].numpy()
    served_ids = [[i for i in row if i >= 0] for row in output]
    assert served_ids[:len(texts)] == eager
    assert served_ids[len(texts):] == tokenizer(tf.constant(inputs[len(texts):])).to_list()


@pytest.mark.parametrize("which", ["byte_pair", "albert", "xlm_roberta"])
def test_pairs_packed_as_transformers_packs_them(which, byte_pair, byte_pair_dir,
                                                 sentencepiece_tokenizers, sentencepiece_dirs,
                                                 all_sotu_sentences):
    if which == "byte_pair":
        tokenizer = byte_pair
        reference = transformers.RobertaTokenizer.from_pretrained(byte_pair_dir)
    else:
        tokenizer = sentencepiece_tokenizers[which]
        reference = TRANSFORMERS_CLASSES[which].from_pretrained(sentencepiece_dirs[which])
    # Rows whose ids agree with transformers' (not a tie-broken segmentation).
    first, second = all_sotu_sentences[1000:1200], all_sotu_sentences[1200:1400]
    preprocessor = BertPreprocessor(tokenizer, sequence_length=48, truncate="longest_first")
    packed = run_preprocessor_test(preprocessor, (first, second))
    expected = reference(first, second, truncation="longest_first", max_length=48,
                         padding="max_length", return_token_type_ids=True)
    rows = [i for i, (a, b) in enumerate(zip(tokenizer.encode_batch(first + second),
                                             reference(first + second, add_special_tokens=False)
                                             ["input_ids"])) if a == b]
    rows = [i for i in range(200) if i in rows and i + 200 in rows]
    assert len(rows) > 190
    for key, theirs in [("token_ids", "input_ids"), ("segment_ids", "token_type_ids"),
                        ("padding_mask", "attention_mask")]:
        np.testing.assert_array_equal(packed[key][rows], np.array(expected[theirs])[rows])


def test_harness_and_bad_input(byte_pair, sentencepiece_tokenizers, byte_pair_dir, tmp_path):
    texts = ["Fellow-Citizens of the Senate", "and House of Representatives:"]
    run_preprocessor_test(byte_pair, texts)
    run_preprocessor_test(sentencepiece_tokenizers["albert"], texts)
    with pytest.raises(ValueError, match="not a byte-level BPE vocabulary"):
        BytePairTokenizer({"a": 0, "b": 1}, [])
    with pytest.raises(ValueError, match="two tokens separated by one space"):
        BytePairTokenizer(os.path.join(byte_pair_dir, "vocab.json"), ["a b c"])
    with pytest.raises(ValueError, match="style must be one of"):
        SentencePieceTokenizer(b"", style="t5")
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        SentencePieceTokenizer(str(bad))
