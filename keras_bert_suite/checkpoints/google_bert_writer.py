"""Writes an original Google BERT checkpoint directory (google-research/bert's layout):
bert_config.json, bert_model.ckpt.{index,data-00000-of-00001} with modeling.py's variable
names (`bert/...`, and `cls/predictions/*`, `cls/seq_relationship/*` for the pretraining
heads) and vocab.txt. google-research/bert, Model Garden's checkpoint converters and our own
reader (`google_bert.py`) read it.

The inverse of `google_bert.py`, through the same module tree (families/module_tree.py).
"""

import os

import numpy as np

from keras_bert_suite.checkpoints import bert_layout
from keras_bert_suite.checkpoints.google_bert import (
    CHECKPOINT_PREFIX, CONFIG_FILE, google_name, is_transposed)
from keras_bert_suite.checkpoints.huggingface_writer import huggingface_config
from keras_bert_suite.checkpoints.preset_dir import write_json, write_vocabulary

# modeling.py hard-wires this epsilon; bert_config.json has no key for another one.
GOOGLE_LAYER_NORM_EPSILON = 1e-12
# bert_config.json's keys (BertConfig in modeling.py).
CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob",
               "hidden_size", "initializer_range", "intermediate_size",
               "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
               "type_vocab_size", "vocab_size")


def google_variables(config, weights):
    """{variable name: float32 array} as modeling.py / run_pretraining.py name them."""
    adapter = _Writer()
    bert_layout.write_weights(weights, config, adapter)
    return adapter.variables


def write_google_bert(directory, config, weights, vocabulary=None):
    """Writes the directory; returns its path. `weights`: canonical names (the encoder's,
    and the pretraining heads' when present)."""
    import tensorflow as tf

    if not np.isclose(config["layer_norm_epsilon"], GOOGLE_LAYER_NORM_EPSILON, rtol=1e-6):
        raise ValueError(
            f"layer_norm_epsilon is {config['layer_norm_epsilon']}, but the original BERT code "
            f"hard-wires {GOOGLE_LAYER_NORM_EPSILON} and bert_config.json cannot say otherwise: "
            f"the checkpoint would compute other numbers. Export to Hugging Face instead.")
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    bert_json = huggingface_config(config, "BertModel")
    write_json(os.path.join(directory, CONFIG_FILE), {key: bert_json[key] for key in CONFIG_KEYS})
    variables = google_variables(config, weights)
    names = sorted(variables)
    # One shard, name-based, as tf.compat.v1.train.Saver wrote the released checkpoints.
    tf.raw_ops.SaveV2(prefix=os.path.join(directory, CHECKPOINT_PREFIX),
                      tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(variables[name]) for name in names])
    if vocabulary is not None:
        write_vocabulary(os.path.join(directory, "vocab.txt"), vocabulary)
    return directory


class _Writer:
    """Google spelling of `bert_layout`'s module paths (the reader's `_Adapter` inverted)."""

    def __init__(self):
        self.variables = {}

    def put(self, path, variable, value):
        value = value.T if is_transposed(path, variable) else value
        self.variables[google_name(path, variable)] = np.ascontiguousarray(value,
                                                                           dtype=np.float32)
