"""ModernBERT as transformers builds it: a small random ModernBertModel (norms randomized too)
whose local layers' window (4: radius 2) is shorter than the sentences, so local and global
layers both matter; saved once per session in both config.json spellings (transformers 5's
`layer_types` + `rope_parameters`, and the released checkpoints' `global_attn_every_n_layers`
+ `global_rope_theta` / `local_rope_theta`), with a byte-level BPE tokenizer learned from
State of the Union text, saved as transformers 5 saves it (tokenizer.json)."""

import json
import os

import numpy as np
import pytest

from tests.conftest import made_once_per_run

SPECIAL_TOKENS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
# 4 layers: 0 and 3 global, 1 and 2 local; rotary bases other than the defaults, so that a
# theta read from the wrong key shows.
CONFIG = dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
              intermediate_size=48, local_attention=4, max_position_embeddings=64,
              global_rope_theta=5_000.0, local_rope_theta=500.0, hidden_activation="gelu")
SPELLINGS = ("transformers5", "released")  # config.json's two spellings (module docstring)
SENTENCES = [
    "The senate passed the bill after a long debate.",
    "We will not tire, we will not falter, and we will not fail.",
    "Hello world",
    "Our economy is strong, and the state of our union is sound.",
]


@pytest.fixture(scope="session")
def modernbert_tokenizer_dir(sotu_files, tmp_path_factory):
    """tokenizer.json (+ tokenizer_config.json) of a byte-level BPE learned from SOTU, packed
    [CLS] A [SEP] (B [SEP]) as ModernBERT's is (made once per `make test` run)."""
    return made_once_per_run(
        "modernbert_tokenizer", lambda directory: _save_tokenizer(sotu_files, directory),
        tmp_path_factory)


def _save_tokenizer(sotu_files, directory):
    import tokenizers
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    learner = tokenizers.ByteLevelBPETokenizer()
    learner.train(sotu_files, vocab_size=2000, min_frequency=2, show_progress=False,
                  special_tokens=SPECIAL_TOKENS)
    tokenizer = learner._tokenizer
    cls, sep = (tokenizer.token_to_id(token) for token in ("[CLS]", "[SEP]"))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]")
    wrapped.save_pretrained(directory)


@pytest.fixture(scope="session")
def modernbert_checkpoints(modernbert_tokenizer_dir, tmp_path_factory):
    """{"transformers5": dir, "released": dir}: the same random ModernBertModel, config.json
    in each spelling, the tokenizer's files beside it (made once per `make test` run)."""
    root = made_once_per_run(
        "modernbert", lambda directory: _save_checkpoints(modernbert_tokenizer_dir, directory),
        tmp_path_factory)
    return {spelling: os.path.join(root, spelling) for spelling in SPELLINGS}


def _save_checkpoints(tokenizer_dir, root):
    import shutil

    import torch
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in (
        ("pad_token_id", "[PAD]"), ("cls_token_id", "[CLS]"), ("sep_token_id", "[SEP]"),
        ("bos_token_id", "[CLS]"), ("eos_token_id", "[SEP]"))}
    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=len(tokenizer), **CONFIG, **ids)
    model = ModernBertModel(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(torch.randn_like(parameter) * 0.2)
    for spelling in SPELLINGS:
        directory = os.path.join(root, spelling)
        model.save_pretrained(directory)
        for name in os.listdir(tokenizer_dir):
            shutil.copy(os.path.join(tokenizer_dir, name), directory)
    _respell_as_released(os.path.join(root, "released", "config.json"))


def _respell_as_released(path):
    """config.json with the released checkpoints' keys instead of transformers 5's."""
    with open(path) as f:
        config = json.load(f)
    kinds = config.pop("layer_types")
    rope = config.pop("rope_parameters")
    assert kinds == ["full_attention", "sliding_attention", "sliding_attention",
                     "full_attention"], kinds
    config.update(global_attn_every_n_layers=3,
                  global_rope_theta=rope["full_attention"]["rope_theta"],
                  local_rope_theta=rope["sliding_attention"]["rope_theta"])
    with open(path, "w") as f:
        json.dump(config, f)


def reference_outputs(directory, inputs):
    """transformers' ModernBertModel of `directory` on `inputs`: hidden states [L + 1] and
    the last hidden state, numpy."""
    import torch
    from transformers import ModernBertModel

    model = ModernBertModel.from_pretrained(directory, attn_implementation="eager").eval()
    with torch.no_grad():
        outputs = model(input_ids=torch.from_numpy(inputs["token_ids"].astype("int64")),
                        attention_mask=torch.from_numpy(inputs["padding_mask"].astype("int64")),
                        output_hidden_states=True)
    return ([state.numpy() for state in outputs.hidden_states],
            outputs.last_hidden_state.numpy())


def packed(directory, sentences=SENTENCES, sequence_length=24):
    """Our preprocessor's inputs for `sentences`, from the checkpoint's tokenizer.json."""
    from keras_bert_suite import BertPreprocessor

    preprocessor = BertPreprocessor.from_preset(directory, sequence_length=sequence_length)
    return {key: np.asarray(value).astype("int32")
            for key, value in preprocessor(list(sentences)).items()}
