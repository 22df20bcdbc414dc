"""Hugging Face's tokenizer.json as a tokenizer source: the SentencePiece model rebuilt from it
tokenizes as the `sentencepiece` library does with the original; WordPiece's word limit and
casing come from it; a directory whose tokenizer files disagree, or a tokenizer.json with a
setting ours would not follow, gets an error that says which. (Whole directories of every
family, as transformers 5 writes them: tests/families/test_family_raw_text.py.)"""

import json
import os
import shutil

import pytest
import sentencepiece
import transformers

from keras_bert_suite.checkpoints import sentencepiece_proto
from keras_bert_suite.checkpoints import tokenizer_json
from keras_bert_suite.text import BertTokenizer
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from tests.text.conftest import SMALL_VOCABULARY

pytestmark = [pytest.mark.needs_tf_graph, pytest.mark.real]

MODEL_FILES = {"albert": "spiece.model", "xlm_roberta": "sentencepiece.bpe.model"}


@pytest.mark.parametrize("style", list(MODEL_FILES))
def test_sentencepiece_model_rebuilt_from_tokenizer_json_tokenizes_as_the_original(
        style, sentencepiece_dirs, all_sotu_sentences, tmp_path):
    """transformers' tokenizer.json of a SentencePiece model -> our model proto: the
    `sentencepiece` library gives the original's pieces on 2,000 real sentences and hard
    cases; the proto's fields survive a read/write round trip."""
    from tests.text.test_tokenizer_parity import HARD_CASES

    original = os.path.join(sentencepiece_dirs[style], MODEL_FILES[style])
    with open(original, "rb") as f:
        proto = f.read()
    assert sentencepiece_proto.read_model(sentencepiece_proto.write_model(
        sentencepiece_proto.read_model(proto))) == sentencepiece_proto.read_model(proto)
    tokenizer_class = {"albert": transformers.AlbertTokenizer,
                       "xlm_roberta": transformers.XLMRobertaTokenizer}[style]
    tokenizer_class.from_pretrained(sentencepiece_dirs[style]).save_pretrained(str(tmp_path))
    arguments = tokenizer_json.sentencepiece_arguments(*tokenizer_json.load(str(tmp_path)))
    assert arguments["style"] == style
    rebuilt = sentencepiece.SentencePieceProcessor(model_proto=arguments["proto"])
    reference = sentencepiece.SentencePieceProcessor(model_file=original)
    texts = all_sotu_sentences[::32] + HARD_CASES
    assert len(texts) > 2000
    expected = reference.encode(texts, out_type=str)
    assert [t for t, a, b in zip(texts, rebuilt.encode(texts, out_type=str), expected)
            if a != b] == []


def _wordpiece_directory(directory, **model_settings):
    """A fast BertTokenizer's save_pretrained over SMALL_VOCABULARY, with `model_settings`
    written into tokenizer.json's model."""
    source = os.path.join(directory, "source")
    os.makedirs(source)
    with open(os.path.join(source, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{token}\n" for token in SMALL_VOCABULARY)
    transformers.BertTokenizer.from_pretrained(source).save_pretrained(directory)
    shutil.rmtree(source)
    path = os.path.join(directory, tokenizer_json.FILE)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["model"].update(model_settings)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return data


def test_wordpiece_word_limit_and_casing_come_from_tokenizer_json(tmp_path):
    _wordpiece_directory(str(tmp_path), max_input_chars_per_word=5)
    tokenizer = BertTokenizer.from_preset(str(tmp_path))
    assert (tokenizer.max_input_chars_per_word, tokenizer.lowercase) == (5, True)
    unknown, a, b = (SMALL_VOCABULARY.index(t) for t in ("[UNK]", "a", "##b"))
    assert tokenizer.encode_batch(["abbbb", "abbbbb"]) == [[a, b, b, b, b], [unknown]]
    assert BertTokenizer(SMALL_VOCABULARY).max_input_chars_per_word == 100  # transformers'


def test_files_that_disagree_are_refused(tmp_path, byte_pair_dir):
    """vocab.txt beside a tokenizer.json of another vocabulary; vocab.json + merges.txt beside
    a tokenizer.json of other merges: which of the two the model was trained with is unknown."""
    wordpiece = tmp_path / "wordpiece"
    wordpiece.mkdir()
    _wordpiece_directory(str(wordpiece))
    (wordpiece / "vocab.txt").write_text("\n".join(SMALL_VOCABULARY[:-1] + ["other"]) + "\n")
    with pytest.raises(ValueError, match="hold different vocabularies"):
        BertTokenizer.from_preset(str(wordpiece))

    byte_pair = tmp_path / "byte_pair"
    transformers.RobertaTokenizer.from_pretrained(byte_pair_dir).save_pretrained(str(byte_pair))
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(byte_pair_dir, name), byte_pair)
    assert tokenizer_from_preset(str(byte_pair)).get_vocabulary()[:3] == ["<s>", "<pad>", "</s>"]
    merges = (byte_pair / "merges.txt").read_text().split("\n")
    (byte_pair / "merges.txt").write_text("\n".join(merges[:1] + merges[2:]))
    with pytest.raises(ValueError, match="two different tokenizers"):
        tokenizer_from_preset(str(byte_pair))


@pytest.mark.parametrize("change, message", [
    (lambda d: d["model"].update(type="WordLevel"), "'WordLevel' model"),
    (lambda d: d["model"].update(continuing_subword_prefix="@@"), "continuing_subword_prefix"),
    (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer is 'Whitespace'"),
    (lambda d: d["normalizer"].update(strip_accents=False), "strip_accents"),
])
def test_tokenizer_json_settings_we_would_not_follow_are_refused(change, message, tmp_path):
    data = _wordpiece_directory(str(tmp_path))
    change(data)
    with open(tmp_path / tokenizer_json.FILE, "w", encoding="utf-8") as f:
        json.dump(data, f)
    with pytest.raises(ValueError, match=message):
        BertTokenizer.from_preset(str(tmp_path))


def test_a_byte_pair_tokenizer_json_is_named_to_bert_tokenizer(tmp_path, byte_pair_dir):
    transformers.RobertaTokenizer.from_pretrained(byte_pair_dir).save_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="byte_pair tokenizer, not WordPiece"):
        BertTokenizer.from_preset(str(tmp_path))
    path = tmp_path / tokenizer_json.FILE
    data = json.loads(path.read_text())
    data["pre_tokenizer"]["add_prefix_space"] = True
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="add_prefix_space"):
        tokenizer_from_preset(str(tmp_path))
