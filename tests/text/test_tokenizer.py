"""BertTokenizer: exact outputs, offsets, API, bad input, presets, serialization, tf.data."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.text import BertTokenizer
from tests.text.conftest import SMALL_VOCABULARY

needs_tf_graph = pytest.mark.needs_tf_graph


def pieces(tokenizer, text):
    return [tokenizer.id_to_token(i) for i in tokenizer.encode_batch([text])[0]]


# === exact outputs ===

@needs_tf_graph
@pytest.mark.parametrize("text, expected", [
    ("The quick brown fox jumps over the lazy dog.",
     ["the", "quick", "brown", "fox", "jump", "##s", "over", "the", "lazy", "dog", "."]),
    ("unaffable", ["un", "##aff", "##able"]),
    ("Café NAÏVE!", ["cafe", "naive", "!"]),
    ("fox-jumped, dog's", ["fox", "-", "jump", "##ed", ",", "dog", "'", "[UNK]"]),
    ("中国fox", ["中", "国", "fox"]),
    ("foxes", ["[UNK]"]),  # "##es" is not in the vocabulary: the whole word is unknown
    ("ab" + "b" * 98, ["a"] + ["##b"] * 99),  # 100 characters: still a word
    ("ab" + "b" * 99, ["[UNK]"]),  # 101 characters: too long (transformers' limit)
])
def test_small_vocabulary_pieces(small_tokenizer, text, expected):
    assert pieces(small_tokenizer, text) == expected


@needs_tf_graph
@pytest.mark.real
def test_real_vocabulary_ids(uncased_tokenizer):
    assert uncased_tokenizer.encode_batch(["Hello, world!", "unaffable"]) == [
        [7592, 1010, 2088, 999], [14477, 20961, 3468]]
    ids = uncased_tokenizer(["The State of the Union."])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.to_list() == [[1996, 2110, 1997, 1996, 2586, 1012]]


@needs_tf_graph
def test_cased_keeps_case_and_accents():
    tokenizer = BertTokenizer(SMALL_VOCABULARY + ["The", "Café"], lowercase=False)
    assert pieces(tokenizer, "The the Café cafe") == ["The", "the", "Café", "cafe"]
    assert pieces(tokenizer, "THE") == ["[UNK]"]


@needs_tf_graph
def test_special_token_strings_are_plain_text(small_tokenizer):
    # As google-research/bert: text cannot inject special tokens (Hugging Face would).
    assert pieces(small_tokenizer, "[SEP] [MASK]") == [
        "[UNK]", "[UNK]", "[UNK]", "[UNK]", "[UNK]", "[UNK]"]
    assert small_tokenizer.sep_token_id not in small_tokenizer.encode_batch(["a [SEP] b"])[0]


@needs_tf_graph
def test_scalar_and_batch_inputs(small_tokenizer):
    scalar = small_tokenizer("the fox")
    assert isinstance(scalar, tf.Tensor) and scalar.shape.rank == 1
    assert scalar.numpy().tolist() == [5, 8]
    batch = small_tokenizer(["the fox", "", "dog"])
    assert batch.to_list() == [[5, 8], [], [14]]
    assert small_tokenizer(np.array(["the fox"])).to_list() == [[5, 8]]


# === offsets ===

@needs_tf_graph
def test_byte_offsets_into_original(small_tokenizer):
    text = "Café  jumps, 中国"  # é is 2 bytes, 中 and 国 3 bytes each
    ids, starts, ends = small_tokenizer.tokenize_with_offsets([text])
    raw = text.encode()
    spans = [raw[s:e].decode() for s, e in zip(starts[0].numpy(), ends[0].numpy())]
    assert [small_tokenizer.id_to_token(i) for i in ids[0].numpy()] == [
        "cafe", "jump", "##s", ",", "中", "国"]
    assert spans == ["Café", "jump", "s", ",", "中", "国"]
    assert ids.to_list() == small_tokenizer([text]).to_list()


@needs_tf_graph
def test_offsets_through_expanding_and_dropped_characters(small_tokenizer):
    # "e\u0301" loses its mark; the control character is dropped; both routes agree.
    _, offsets = small_tokenizer.encode_batch_with_offsets(["cafe\u0301\x07 fox"])
    assert offsets == [[(0, 4), (7, 10)]]


# === detokenize and vocabulary API ===

@needs_tf_graph
def test_detokenize(small_tokenizer):
    ids = small_tokenizer(["the fox jumps", "unaffable dog"])
    assert small_tokenizer.detokenize(ids).numpy().tolist() == [b"the fox jumps", b"unaffable dog"]
    assert small_tokenizer.detokenize([5, 8]).numpy() == b"the fox"


@needs_tf_graph
def test_vocabulary_api(small_tokenizer):
    assert small_tokenizer.vocabulary_size() == len(SMALL_VOCABULARY)
    assert (small_tokenizer.pad_token_id, small_tokenizer.unknown_token_id,
            small_tokenizer.cls_token_id, small_tokenizer.sep_token_id,
            small_tokenizer.mask_token_id) == (0, 1, 2, 3, 4)
    assert small_tokenizer.token_to_id("fox") == 8 and small_tokenizer.id_to_token(8) == "fox"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        small_tokenizer.token_to_id("zebra")
    with pytest.raises(ValueError, match="id must be an int"):
        small_tokenizer.id_to_token(len(SMALL_VOCABULARY))


# === bad input: defined results, never a crash ===

@needs_tf_graph
@pytest.mark.parametrize("text", ["", " ", "\t\n\r \u00a0\u3000", "\x00\x01\u200b\ufeff"])
def test_empty_and_invisible_texts_give_no_ids(small_tokenizer, text):
    assert small_tokenizer.encode_batch([text]) == [[]]
    ids, offsets = small_tokenizer.encode_batch_with_offsets([text])
    assert ids == [[]] and offsets == [[]]


@needs_tf_graph
def test_control_characters_are_dropped(small_tokenizer):
    assert pieces(small_tokenizer, "fo\x00x\x07 d\x1bog\x7f") == ["fox", "dog"]


@needs_tf_graph
def test_emoji_are_unknown_words(small_tokenizer):
    assert pieces(small_tokenizer, "the 😀 fox 👨‍👩‍👧") == ["the", "[UNK]", "fox", "[UNK]"]


@needs_tf_graph
@pytest.mark.parametrize("raw, same_as", [
    (b"fo\xffx the", "fox the"),  # stray byte
    (b"the \xc3 dog", "the  dog"),  # truncated 2-byte sequence
    (b"d\xed\xa0\x80og", "dog"),  # an encoded surrogate
    (b"\xc0\xafthe", "the"),  # overlong "/"
    (b"\xf4\x90\x80\x80fox", "fox"),  # beyond U+10FFFF
])
def test_invalid_utf8_is_replaced_then_dropped(small_tokenizer, raw, same_as):
    expected = small_tokenizer([same_as]).to_list()
    assert small_tokenizer(tf.constant([raw])).to_list() == expected
    ids, starts, ends = small_tokenizer.tokenize_with_offsets(tf.constant([raw]))
    assert ids.to_list() == expected
    assert all(0 <= s < e <= len(raw) for s, e in zip(starts[0].numpy(), ends[0].numpy()))


@needs_tf_graph
@pytest.mark.real
def test_hundred_thousand_characters(uncased_tokenizer, minilm_vocab):
    import tokenizers

    reference = tokenizers.BertWordPieceTokenizer(minilm_vocab)
    text = ("Freedom of speech and expression, everywhere in the wörld. " * 1700)[:100_000]
    ids = uncased_tokenizer.encode_batch([text, "ok"])
    assert ids[0] == reference.encode(text, add_special_tokens=False).ids
    assert len(ids[0]) > 18_000 and ids[1] == [7929]
    assert uncased_tokenizer.encode_batch(["x" * 100_000]) == [[100]]  # one enormous word


# === Python-side misuse: clear errors ===

@needs_tf_graph
@pytest.mark.parametrize("vocabulary, message", [
    (123, "vocab.txt path or a list of str"),
    ("/no/such/vocab.txt", "is not a file"),
    ([], "is empty"),
    (["[PAD]", "a"], r"no \[UNK\] token"),
    (["[UNK]", "a", "a"], "appears twice"),
    (["[UNK]", "", "a"], "is empty"),
    (["[UNK]", 5], "must be a str"),
])
def test_bad_vocabularies(vocabulary, message):
    with pytest.raises(ValueError, match=message):
        BertTokenizer(vocabulary)


@needs_tf_graph
def test_bad_arguments_and_inputs(small_tokenizer):
    with pytest.raises(ValueError, match="lowercase must be True or False"):
        BertTokenizer(SMALL_VOCABULARY, lowercase="yes")
    with pytest.raises(ValueError, match="positive int"):
        BertTokenizer(SMALL_VOCABULARY, max_input_chars_per_word=0)
    with pytest.raises(ValueError, match="must be strings"):
        small_tokenizer(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="must be str"):
        small_tokenizer([1, 2])
    with pytest.raises(ValueError, match="1-D batch"):
        small_tokenizer(tf.constant([["a"], ["b"]]))
    with pytest.raises(ValueError, match="list of str"):
        small_tokenizer.encode_batch("one text")
    with pytest.raises(ValueError, match="list of str"):
        small_tokenizer.encode_batch([b"bytes"])


@needs_tf_graph
def test_missing_special_tokens_are_reported():
    tokenizer = BertTokenizer(["[UNK]", "a"])
    for name, token in [("cls", "CLS"), ("sep", "SEP"), ("pad", "PAD"), ("mask", "MASK")]:
        with pytest.raises(ValueError, match=rf"no \[{token}\] token.*Add a line"):
            getattr(tokenizer, f"{name}_token_id")


# === presets ===

@needs_tf_graph
@pytest.mark.real
def test_from_preset(minilm_vocab):
    packaged = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    assert packaged.vocabulary_size() == 30522 and packaged.lowercase
    architecture_only = BertTokenizer.from_preset("bert_tiny_uncased")
    assert architecture_only.vocabulary == packaged.vocabulary
    with pytest.raises(ValueError, match="pass vocabulary=|Pass vocabulary="):
        BertTokenizer.from_preset("bert_base_cased")
    cased = BertTokenizer.from_preset("bert_base_cased", vocabulary=SMALL_VOCABULARY)
    assert not cased.lowercase and cased.vocabulary_size() == len(SMALL_VOCABULARY)


# === serialization and tf.data (every backend) ===

def test_keras_round_trip(small_tokenizer, tmp_path):
    tokenizer = BertTokenizer(SMALL_VOCABULARY, lowercase=False, max_input_chars_per_word=50)
    path = str(tmp_path / "tokenizer.keras")
    keras.saving.save_model(tokenizer, path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertTokenizer)
    assert restored.get_config() == tokenizer.get_config()
    assert restored.get_config()["vocabulary"] == SMALL_VOCABULARY
    texts = ["the quick fox", "The Café"]
    assert restored(texts).to_list() == tokenizer(texts).to_list()


def test_in_tf_data_under_current_backend(small_tokenizer):
    dataset = tf.data.Dataset.from_tensor_slices(["the fox jumps", "", "lazy dog!"])
    per_example = [x.numpy().tolist() for x in dataset.map(small_tokenizer)]
    assert per_example == [[5, 8, 9, 10], [], [13, 14, 22]]
    batched = next(iter(dataset.batch(3).map(small_tokenizer)))
    assert batched.to_list() == per_example
