"""Original Google BERT checkpoints (google-research/bert): bert_config.json,
bert_model.ckpt.{index,data-*} and vocab.txt.

Variables keep the names modeling.py gave them: `bert/embeddings/word_embeddings`,
`bert/encoder/layer_{i}/attention/self/query/kernel` ([in, out] already), `bert/pooler/dense/*`,
and for pretraining checkpoints `cls/predictions/*` and `cls/seq_relationship/*`.
Optimizer slots (`*/adam_m`, `*/adam_v`) and `global_step` are ignored.
"""

import glob
import json
import os

from keras_bert_suite.checkpoint_errors import CheckpointMismatchError
from keras_bert_suite.checkpoints import bert_layout
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.tensors import TensorSource
from keras_bert_suite.families.bert_config import encoder_config

NAME = "original Google BERT checkpoint"
CONFIG_FILE = "bert_config.json"
CHECKPOINT_PREFIX = "bert_model.ckpt"
FILES_NEEDED = f"{CONFIG_FILE} + {CHECKPOINT_PREFIX}.index + {CHECKPOINT_PREFIX}.data-*"


def matches(directory, config_json):
    # Model Garden's TF2 checkpoints look the same from outside: detect.READERS asks it first.
    return os.path.exists(os.path.join(directory, CONFIG_FILE))


def load(directory, load_weights=True, checkpoint_prefix=None):
    """`checkpoint_prefix` picks one checkpoint (e.g. `.../model.ckpt-100000`) in `directory`."""
    return load_directory(directory, _read_weights, "google_bert", load_weights, checkpoint_prefix)


def load_directory(directory, read_weights, checkpoint_format, load_weights=True,
                   checkpoint_prefix=None, config_file=CONFIG_FILE, read_config=encoder_config):
    """What Google's TF1 and Model Garden's TF2 releases share: bert_config.json, vocab.txt and
    a TensorFlow checkpoint, whose weights `read_weights(prefix, config, config_path)` reads.
    `config_file` / `read_config(json, path)`: another family's config (ALBERT's)."""
    config_path = os.path.join(directory, config_file)
    with open(config_path) as f:
        config = read_config(json.load(f), config_path)
    weights = None
    if load_weights:
        prefix = checkpoint_prefix or find_checkpoint_prefix(directory)
        weights = read_weights(prefix, config, config_path)
    return Checkpoint(config=config, weights=weights, format=checkpoint_format)


def _read_weights(prefix, config, config_path):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    source = TensorSource(
        reader.get_variable_to_shape_map(), reader.get_tensor,
        where=f"checkpoint {prefix}", config_file=config_path)
    source.check_layer_count(r"(?:^|/)encoder/layer_(\d+)/", config["num_layers"])
    weights = bert_layout.encoder_weights(config, _Adapter(source))
    weights.update(bert_layout.head_weights(config, _Adapter(source)))  # `cls/...`
    return weights


# run_pretraining.py's own names for the NSP dense; modeling.py multiplies its kernel with
# transpose_b=True, so the variable is [2, H] where ours is [H, 2].
NSP_PATH = "cls.seq_relationship"
NSP_VARIABLES = {"kernel": "output_weights", "bias": "output_bias"}


def google_name(path, variable):
    """A module path of the shared tree and a variable in Google's spelling:
    ("encoder.layer.3.attention.self.query", "kernel") ->
    "bert/encoder/layer_3/attention/self/query/kernel" (the `cls.` heads: no `bert/`)."""
    prefix = "" if path.startswith("cls.") else "bert/"
    name = prefix + path.replace("encoder.layer.", "encoder/layer_").replace(".", "/")
    if path == NSP_PATH:
        variable = NSP_VARIABLES[variable]
    return name if variable is None else f"{name}/{variable}"


def is_transposed(path, variable):
    """Google stores this variable transposed from ours (the NSP kernel)."""
    return path == NSP_PATH and variable == "kernel"


class _Adapter:
    """Google spelling of the shared BERT module tree (see bert_layout.py)."""

    def __init__(self, source):
        self.source = source

    def has(self, path, variable):
        return google_name(path, variable) in self.source

    def get(self, path, variable, shape):
        if is_transposed(path, variable):
            return self.source.get(google_name(path, variable), tuple(reversed(shape))).T
        return self.source.get(google_name(path, variable), shape)


def find_checkpoint_prefix(directory):
    """bert_model.ckpt as released; else the `checkpoint` file's latest; else the only one."""
    import tensorflow as tf

    released = os.path.join(directory, CHECKPOINT_PREFIX)
    if os.path.exists(released + ".index"):
        return released
    latest = tf.train.latest_checkpoint(directory)
    if latest:
        return latest
    indexes = sorted(glob.glob(os.path.join(directory, "*.index")))
    if len(indexes) == 1:
        return indexes[0][: -len(".index")]
    found = f"several: {[os.path.basename(p) for p in indexes]}" if indexes else "none"
    raise CheckpointMismatchError(
        f"{directory} has {CONFIG_FILE} but no single TensorFlow checkpoint to read "
        f"(expected {CHECKPOINT_PREFIX}.index + .data-*; found {found}). Pass the checkpoint "
        f"prefix itself, e.g. {os.path.join(directory, 'model.ckpt-1000')}.")

