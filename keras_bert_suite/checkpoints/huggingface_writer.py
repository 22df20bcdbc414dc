"""Writes a Hugging Face BERT directory that `transformers` loads with `from_pretrained`:
config.json, model.safetensors, and with a tokenizer its files: the family's own (vocab.txt,
vocab.json + merges.txt, the SentencePiece model), tokenizer.json (what transformers 5's
`AutoTokenizer` reads) and tokenizer_config.json, which the tokenizer writes itself
(`save_huggingface_files`; a bare WordPiece token list: tokenizer_json.save_wordpiece).

The inverse of `huggingface.py`: the same module trees (BERT's `module_tree.MODULES`, each
family's in `keras_bert_suite/families/`), spelled the way `transformers` names its state
dict (`weight`/`bias`, Linear kernels [out, in]).
"""

import os

import numpy as np

from keras_bert_suite.checkpoints import bert_layout
from keras_bert_suite.checkpoints import tokenizer_json
from keras_bert_suite.checkpoints import weight_table
from keras_bert_suite.checkpoints.huggingface import (
    is_output_bias, output_bias_names, pooler_module_path, tensor_name)
from keras_bert_suite.checkpoints.preset_dir import write_json
from keras_bert_suite.checkpoints.task_heads import ENCODER_POOLER
from keras_bert_suite.families.bert import FAMILY as BERT

# The masked-LM classes build their encoder without the pooler (the task classes say where
# theirs is: each task's `TransformersHead`, checkpoints/task_heads.py).
WITHOUT_POOLER_SUFFIX = ("ForMaskedLM", "LMHeadModel")


def huggingface_config(config, architecture, family=BERT, **extra):
    """config.json for BertEncoder arguments `config` (the inverse of the family's
    `encoder_config`)."""
    return {"architectures": [architecture], "model_type": family.model_types[0],
            **family.hf_config(config), **extra}


def huggingface_tensors(config, weights, architecture, head_tensors=None, family=BERT,
                        pooler=ENCODER_POOLER):
    """{state-dict name: float32 array}: the encoder (and pretraining heads in `weights`) in
    transformers' names, plus `head_tensors` (already named) for a task architecture.
    `pooler`: where the task class keeps our pooler (`TransformersHead.in_family`)."""
    # A task architecture's encoder sits under the family's prefix (`bert.`); the base
    # model's (BertModel, RobertaModel, ...) at the top level.
    adapter = _Writer("" if architecture == family.base_model else family.prefix,
                      with_pooler=(pooler == ENCODER_POOLER
                                   and not architecture.endswith(WITHOUT_POOLER_SUFFIX)),
                      head_paths=bert_layout.head_paths(family.tree))
    bert_layout.write_weights(weights, config, adapter, family.tree)
    tensors = adapter.tensors
    if pooler not in (None, ENCODER_POOLER):  # RoBERTa's classifier.dense, ModernBERT's head
        for name, value in weights.items():
            if name.startswith("pooler/"):
                module, variable = weight_table.split_template(name)
                value = np.asarray(value)
                tensors[tensor_name(pooler_module_path(pooler, module), variable)] = _float32(
                    value.T if variable == "kernel" else value)
    for name, value in (head_tensors or {}).items():
        tensors[name] = _float32(value)
    return tensors


def write_huggingface(directory, config, weights, architecture, head_tensors=None,
                      vocabulary=None, lowercase=True, family=BERT, pooler=ENCODER_POOLER,
                      **extra_config):
    """Writes the directory; returns its path. `vocabulary`: a tokenizer of ours or a
    WordPiece token list (None: no tokenizer files). `extra_config` goes into config.json
    (e.g. `id2label`, `problem_type`); `family`: a `families.Family` (default BERT)."""
    from safetensors.numpy import save_file

    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    tensors = huggingface_tensors(config, weights, architecture, head_tensors, family, pooler)
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    write_json(os.path.join(directory, "config.json"),
               huggingface_config(config, architecture, family, **extra_config))
    length = config["max_sequence_length"]
    if hasattr(vocabulary, "save_huggingface_files"):
        vocabulary.save_huggingface_files(directory, length, lowercase=lowercase)
    elif vocabulary is not None:
        tokenizer_json.save_wordpiece(directory, list(vocabulary), lowercase, length)
    return directory


class _Writer:
    """Hugging Face spelling of `bert_layout`'s module paths (the reader's `_Adapter` inverted)."""

    def __init__(self, prefix, with_pooler, head_paths):
        self.prefix, self.with_pooler, self.head_paths = prefix, with_pooler, head_paths
        self.tensors = {}

    def put(self, path, variable, value):
        if path.startswith("pooler") and not self.with_pooler:
            return
        if is_output_bias(path, variable):
            self.tensors[output_bias_names(path)[0]] = _float32(value)
            return
        name = path if path in self.head_paths else f"{self.prefix}{path}"
        if variable == "kernel":  # ours [in, out] -> torch.nn.Linear [out, in]
            value = value.T
        self.tensors[tensor_name(name, variable)] = _float32(value)


def _float32(value):
    return np.ascontiguousarray(value, dtype=np.float32)
