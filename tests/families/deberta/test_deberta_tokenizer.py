"""DeBERTa-v3's tokenizer in TensorFlow ops (SentencePiece style "deberta"): from the
tokenizer.json transformers 5 writes and from a bare spm.model, ids identical to transformers'
DebertaV2Tokenizer on real sentences and white-space cases, pairs packed [CLS] A [SEP] B [SEP],
and written back as files transformers reads to the same ids."""

import numpy as np
import pytest
import transformers

from keras_bert_suite.text import BertPreprocessor, SentencePieceTokenizer
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from tests.families.deberta.conftest import deberta_sentences

pytestmark = [pytest.mark.needs_tf_graph, pytest.mark.real]

# What the normalizer folds or keeps: runs of spaces, tabs and newlines, leading and trailing
# white space, non-ASCII spaces alone and in runs, composed and decomposed accents.
WHITE_SPACE_CASES = ["Hello  world", " Hello world ", "a\n\nb\tc", "a\rb", "x\u00a0y",
                     "x \u00a0 y", "  ", "", "caf\u00e9", "cafe\u0301 au lait", "end\u3000",
                     "tab\x0bsplit", "two\x0c\x0cfeeds", "\u2028line"]


def _expected(reference, texts):
    return reference(texts, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("directory", ["deberta_dir", "deberta_spm_dir"])
def test_ids_are_transformers_on_real_sentences(directory, request, all_sotu_sentences):
    path = request.getfixturevalue(directory)
    tokenizer = tokenizer_from_preset(path)
    assert isinstance(tokenizer, SentencePieceTokenizer) and tokenizer.style == "deberta"
    # A bare spm.model names no class: transformers' DebertaV2Tokenizer reads it, as the
    # released checkpoints' tokenizer_config.json says.
    reference = transformers.DebertaV2Tokenizer.from_pretrained(path)
    assert tokenizer.get_vocabulary() == reference.convert_ids_to_tokens(
        list(range(len(reference))))
    texts = deberta_sentences(all_sotu_sentences) + WHITE_SPACE_CASES
    ids = tokenizer.encode_batch(texts)
    expected = _expected(reference, texts)
    assert [text for text, a, b in zip(texts, ids, expected) if a != b] == []


def test_pairs_and_files_round_trip(deberta_dir, tmp_path):
    tokenizer = tokenizer_from_preset(deberta_dir)
    reference = transformers.AutoTokenizer.from_pretrained(deberta_dir)
    first, second = ["The senate passed the bill.", "Hello world"], ["It goes on.", "Hi"]
    packed = BertPreprocessor(tokenizer, sequence_length=24)((first, second))
    expected = reference(first, second, padding="max_length", max_length=24,
                         return_tensors="np")
    assert np.asarray(packed["token_ids"]).tolist() == expected["input_ids"].tolist()
    assert np.asarray(packed["padding_mask"]).tolist() == expected["attention_mask"].tolist()
    # Written back (tokenizer.json + spm.model): transformers and we read the same ids.
    tokenizer.save_huggingface_files(str(tmp_path), model_max_length=512)
    again = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    texts = first + second + WHITE_SPACE_CASES
    assert _expected(again, texts) == _expected(reference, texts)
    assert tokenizer_from_preset(str(tmp_path)).encode_batch(texts) == _expected(
        reference, texts)
