"""DeBERTa-v3 as transformers builds it: a small random DebertaV2Model with v3's settings
(fewer position buckets than the sentences have tokens, so log buckets and their clamp both
matter; LayerNorm weights randomized too), saved with `save_pretrained` once per session beside
a DebertaV2Tokenizer (tokenizer.json only, as transformers 5 writes it) whose Unigram model
`tokenizers` learned from State of the Union sentences; and a directory holding only a
SentencePiece `spm.model` (what the released checkpoints ship), learned by `sentencepiece`."""

import json
import os

import numpy as np
import pytest

from tests.conftest import made_once_per_run

# microsoft/deberta-v3-base's settings on a tiny shape: 8 buckets (log beyond distance 4),
# reaching 16; the vocabulary is the tokenizer's (1,000 pieces + [MASK]) and some spare rows,
# as the released 128,100 rows exceed the tokenizer's 128,001.
CONFIG = dict(vocab_size=1008, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=64, relative_attention=True,
              position_buckets=8, max_relative_positions=16, pos_att_type=["p2c", "c2p"],
              share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
              type_vocab_size=0, layer_norm_eps=1e-7, hidden_act="gelu", pad_token_id=0)
SPECIAL_TOKENS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
VOCABULARY_SIZE = 1000
# Every 40th State of the Union sentence (~1,600) to learn from.
LEARN_STRIDE = 40


@pytest.fixture(scope="session")
def deberta_learning_sentences(all_sotu_sentences):
    return all_sotu_sentences[::LEARN_STRIDE]


@pytest.fixture(scope="session")
def deberta_dir(deberta_learning_sentences, tmp_path_factory):
    """A transformers DeBERTa-v3 directory: config.json, model.safetensors, tokenizer.json,
    tokenizer_config.json (made once per `make test` run)."""
    return made_once_per_run(
        "deberta", lambda directory: _save_deberta(deberta_learning_sentences, directory),
        tmp_path_factory)


def _save_deberta(sentences, directory):
    import tokenizers
    import torch
    import transformers

    learner = tokenizers.Tokenizer(tokenizers.models.Unigram())
    learner.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace()
    learner.train_from_iterator(sentences, tokenizers.trainers.UnigramTrainer(
        vocab_size=VOCABULARY_SIZE, special_tokens=SPECIAL_TOKENS, unk_token="[UNK]",
        show_progress=False))
    pieces = [tuple(piece) for piece in json.loads(learner.to_str())["model"]["vocab"]]
    tokenizer = transformers.DebertaV2Tokenizer(vocab=pieces, unk_id=3)
    tokenizer.save_pretrained(directory)
    assert sorted(os.listdir(directory)) == ["tokenizer.json", "tokenizer_config.json"]

    torch.manual_seed(0)
    model = transformers.DebertaV2Model(transformers.DebertaV2Config(**CONFIG)).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "layernorm" in name.lower():
                parameter.add_(torch.randn_like(parameter) * 0.2)
    model.save_pretrained(directory)


@pytest.fixture(scope="session")
def deberta_spm_dir(deberta_learning_sentences, tmp_path_factory):
    """A directory with only `spm.model`, ids laid out as the released model's ([PAD] 0,
    [CLS] 1, [SEP] 2, [UNK] 3; [MASK] is transformers' addition after the pieces)."""
    def learn(directory):
        import sentencepiece

        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(deberta_learning_sentences),
            model_prefix=os.path.join(directory, "spm"), vocab_size=VOCABULARY_SIZE,
            model_type="unigram", character_coverage=0.9995, pad_id=0, bos_id=1, eos_id=2,
            unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]", eos_piece="[SEP]",
            unk_piece="[UNK]", minloglevel=2)
        os.remove(os.path.join(directory, "spm.vocab"))

    return made_once_per_run("deberta_spm", learn, tmp_path_factory)


def deberta_sentences(all_sotu_sentences):
    """Real sentences to compare ids on: every 20th of the corpus (~3,200)."""
    return all_sotu_sentences[::20]


def padded_inputs(tokenizer, texts, length):
    """transformers' ids, padded to `length`, as the encoder's inputs (int32)."""
    encoded = tokenizer(texts, padding="max_length", max_length=length, truncation=True,
                        return_tensors="np")
    mask = encoded["attention_mask"].astype("int32")
    return {"token_ids": encoded["input_ids"].astype("int32"),
            "segment_ids": np.zeros_like(mask), "padding_mask": mask}
