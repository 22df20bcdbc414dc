"""Writes a Hugging Face BERT directory that `transformers` loads with `from_pretrained`:
config.json, model.safetensors, and with a vocabulary vocab.txt, tokenizer_config.json and
special_tokens_map.json (what `AutoTokenizer` reads; it builds its fast tokenizer from them).

The inverse of `huggingface.py`: the same module tree (`bert_layout.MODULES`), spelled the
way `transformers` names its state dict (`weight`/`bias`, Linear kernels [out, in]).
"""

import os

import numpy as np

from keras_bert_suite.checkpoints import bert_layout
from keras_bert_suite.checkpoints.preset_dir import write_json, write_vocabulary

# Architectures whose encoder sits under `bert.`; BertModel's sits at the top level.
ENCODER_PREFIX = {"BertModel": ""}
# These build their encoder without the pooler (our tasks leave it frozen and unread).
WITHOUT_POOLER = {"BertForMaskedLM", "BertForTokenClassification", "BertForQuestionAnswering"}
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                  "cls_token": "[CLS]", "mask_token": "[MASK]"}


def huggingface_config(config, architecture, **extra):
    """BertConfig JSON for BertEncoder arguments `config` (the inverse of `encoder_config`)."""
    return {
        "architectures": [architecture],
        "model_type": "bert",
        "vocab_size": config["vocabulary_size"],
        "hidden_size": config["hidden_dim"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_heads"],
        "intermediate_size": config["intermediate_dim"],
        "hidden_act": "gelu",  # the exact erf GELU, as BertEncoder computes it
        "hidden_dropout_prob": config["dropout"],
        "attention_probs_dropout_prob": config["dropout"],
        "max_position_embeddings": config["max_sequence_length"],
        "type_vocab_size": config["num_segments"],
        "initializer_range": config["initializer_range"],
        "layer_norm_eps": config["layer_norm_epsilon"],
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
        **extra,
    }


def huggingface_tensors(config, weights, architecture, head_tensors=None):
    """{state-dict name: float32 array}: the encoder (and pretraining heads in `weights`) in
    transformers' names, plus `head_tensors` (already named) for a task architecture."""
    adapter = _Writer(ENCODER_PREFIX.get(architecture, "bert."),
                      with_pooler=architecture not in WITHOUT_POOLER)
    bert_layout.write_weights(weights, config, adapter)
    tensors = adapter.tensors
    for name, value in (head_tensors or {}).items():
        tensors[name] = _float32(value)
    return tensors


def write_huggingface(directory, config, weights, architecture, head_tensors=None,
                      vocabulary=None, lowercase=True, **extra_config):
    """Writes the directory; returns its path. `extra_config` goes into config.json
    (e.g. `id2label`, `problem_type`)."""
    from safetensors.numpy import save_file

    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    tensors = huggingface_tensors(config, weights, architecture, head_tensors)
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    write_json(os.path.join(directory, "config.json"),
               huggingface_config(config, architecture, **extra_config))
    if vocabulary is not None:
        write_vocabulary(os.path.join(directory, "vocab.txt"), vocabulary)
        write_json(os.path.join(directory, "tokenizer_config.json"), {
            "tokenizer_class": "BertTokenizer", "do_lower_case": bool(lowercase),
            "strip_accents": None, "tokenize_chinese_chars": True,
            "model_max_length": config["max_sequence_length"], **SPECIAL_TOKENS})
        write_json(os.path.join(directory, "special_tokens_map.json"), SPECIAL_TOKENS)
    return directory


class _Writer:
    """Hugging Face spelling of `bert_layout`'s module paths (the reader's `_Adapter` inverted)."""

    def __init__(self, prefix, with_pooler):
        self.prefix, self.with_pooler, self.tensors = prefix, with_pooler, {}

    def put(self, path, variable, value):
        if path.startswith("pooler.") and not self.with_pooler:
            return
        if path == "cls.predictions.output_bias":
            self.tensors["cls.predictions.bias"] = _float32(value)
            return
        name = path if path.startswith("cls.") else f"{self.prefix}{path}"
        if variable == "kernel":  # ours [in, out] -> torch.nn.Linear [out, in]
            value = value.T
        suffix = "bias" if variable in ("bias", "beta") else "weight"
        self.tensors[f"{name}.{suffix}"] = _float32(value)


def _float32(value):
    return np.ascontiguousarray(value, dtype=np.float32)
