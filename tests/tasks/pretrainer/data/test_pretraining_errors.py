"""Bad input: clear errors, or the documented handling of the original script."""

import pytest

from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances
from keras_bert_suite.text import BertTokenizer


WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


def test_empty_corpus(tokenizer):
    for documents in ([], [[]], [["", "   "]], [["§§§"]] * 0):
        with pytest.raises(ValueError, match="corpus is empty"):
            create_pretraining_instances(documents, tokenizer)


def test_vocab_without_special_tokens():
    for missing in ("[MASK]", "[CLS]", "[SEP]"):
        tokenizer = BertTokenizer([t for t in VOCAB if t != missing])
        with pytest.raises(ValueError, match=f"no \\{missing[:-1]}\\]"):
            create_pretraining_instances([["the cat sat ."], ["the dog ran ."]], tokenizer)


def test_max_seq_length_too_small(tokenizer):
    docs = [["the cat sat ."], ["the dog ran ."]]
    with pytest.raises(ValueError, match="sequence_length=4 is too small"):
        create_pretraining_instances(docs, tokenizer, sequence_length=4)
    with pytest.raises(ValueError, match="sequence_length=2 is too small"):
        create_pretraining_instances(docs, tokenizer, sequence_length=2,
                                     instance_format="contiguous")
    assert create_pretraining_instances(docs, tokenizer, sequence_length=5, dupe_factor=1)


def test_nsp_needs_two_documents(tokenizer):
    with pytest.raises(ValueError, match="at least 2 documents"):
        create_pretraining_instances([["the cat sat .", "the dog ran ."]], tokenizer)
    assert create_pretraining_instances([["the cat sat .", "the dog ran ."]], tokenizer,
                                        instance_format="contiguous")


def test_bad_rates(tokenizer):
    docs = [["the cat"], ["the dog"]]
    for kwargs in ({"masked_lm_prob": 0.0}, {"max_predictions_per_seq": 0},
                   {"mask_token_rate": 0.95, "random_token_rate": 0.1}, {"dupe_factor": 0},
                   {"short_seq_prob": 1.5}):
        with pytest.raises(ValueError):
            create_pretraining_instances(docs, tokenizer, **kwargs)


def test_single_sentence_documents_are_always_random_next(tokenizer):
    docs = [["the cat sat on the mat ."], ["the dog ran far away ."], ["cats ran ."]]
    instances = create_pretraining_instances(docs, tokenizer, dupe_factor=5, seed=1)
    assert len(instances) == 15
    assert all(i.is_random_next for i in instances)


def test_lines_longer_than_max_seq_length_are_trimmed(tokenizer):
    long_line = " ".join(WORDS * 10)  # 100 tokens
    docs = [[long_line], [long_line, "the cat ."], ["the dog ran ."]]
    instances = create_pretraining_instances(docs, tokenizer, sequence_length=16, dupe_factor=3,
                                             static_masking=False, seed=2)
    assert instances
    for inst in instances:
        assert len(inst.token_ids) <= 16
        assert 1 <= inst.segment_ids.count(1) - 1  # B keeps at least one token
        assert inst.segment_ids.count(0) >= 3  # [CLS], A (>= 1 token), [SEP]
