"""Each tokenizer class reads and writes its own files: `save_files` and `from_directory` round
trip (transformers' names), `save_huggingface_files` writes what `tokenizer_from_preset` reads
back through tokenizer.json, and `text/tokenizer_files.py` picks the class by the files."""

import json
import os

import pytest

from keras_bert_suite.text import BertTokenizer, BytePairTokenizer, SentencePieceTokenizer
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from tests.text.conftest import SMALL_VOCABULARY

pytestmark = pytest.mark.needs_tf_graph

TEXTS = ["The quick fox, naïve as ever.", "a b"]


def _config(tokenizer):
    """The config but the layer's generated name."""
    return {key: value for key, value in tokenizer.get_config().items() if key != "name"}


def _family_tokenizers(byte_pair_dir, sentencepiece_dirs):
    return [BytePairTokenizer.from_directory(byte_pair_dir),
            *(SentencePieceTokenizer.from_directory(directory)
              for directory in sentencepiece_dirs.values())]


def test_wordpiece_files_round_trip_with_their_casing(tmp_path):
    tokenizer = BertTokenizer(SMALL_VOCABULARY, lowercase=False)
    tokenizer.save_files(str(tmp_path))
    assert os.listdir(tmp_path) == ["vocab.txt"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))

    restored = BertTokenizer.from_directory(str(tmp_path))

    assert _config(restored) == _config(tokenizer)


def test_huggingface_files_come_back_through_tokenizer_json(tmp_path):
    tokenizer = BertTokenizer(SMALL_VOCABULARY, lowercase=False, max_input_chars_per_word=7)
    tokenizer.save_huggingface_files(str(tmp_path), model_max_length=32)
    os.remove(tmp_path / "vocab.txt")  # what transformers 5 keeps: tokenizer.json alone

    restored = tokenizer_from_preset(str(tmp_path))

    assert isinstance(restored, BertTokenizer)
    assert _config(restored) == _config(tokenizer)


@pytest.mark.real
def test_each_family_tokenizer_writes_the_files_it_reads(
        byte_pair_dir, sentencepiece_dirs, tmp_path):
    for index, tokenizer in enumerate(_family_tokenizers(byte_pair_dir, sentencepiece_dirs)):
        own, huggingface = tmp_path / f"own{index}", tmp_path / f"hf{index}"
        own.mkdir()
        huggingface.mkdir()
        tokenizer.save_files(str(own))
        tokenizer.save_huggingface_files(str(huggingface), model_max_length=64)

        for directory in (own, huggingface):
            restored = tokenizer_from_preset(str(directory))
            assert type(restored) is type(tokenizer), directory
            assert _config(restored) == _config(tokenizer), directory
            assert restored.encode_batch(TEXTS) == tokenizer.encode_batch(TEXTS)


@pytest.mark.real
def test_keras_hub_classes_name_the_tokenizer_and_read_back(
        byte_pair_dir, sentencepiece_dirs, tmp_path):
    expected = ["RobertaTokenizer", "AlbertTokenizer", "XLMRobertaTokenizer"]
    tokenizers = _family_tokenizers(byte_pair_dir, sentencepiece_dirs)
    assert [t.keras_hub_tokenizer()[0] for t in tokenizers] == expected
    assert BertTokenizer(SMALL_VOCABULARY).keras_hub_tokenizer() is None
    # KerasHub's layout: tokenizer.json names the class, the files are under assets/tokenizer/.
    sentencepiece = tokenizers[1]
    assets = tmp_path / "assets" / "tokenizer"
    assets.mkdir(parents=True)
    (assets / "vocabulary.spm").write_bytes(sentencepiece.proto)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"class_name": "AlbertTokenizer"}))

    restored = tokenizer_from_preset(str(tmp_path))

    assert _config(restored) == _config(sentencepiece)
