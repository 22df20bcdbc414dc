"""Our own preset directory: what `BertEncoder.save_preset` writes and `from_preset` reads.

    config.json         {"format": "keras_bert_suite", "format_version": 2,
                         "class_name": "BertEncoder", "config": {architecture arguments}}
                        A pruned encoder's config also holds its per-layer sizes
                        (`layer_num_heads`, `layer_intermediate_dims`) and is
                        format_version 3, so an older reader says to upgrade instead of
                        failing on the unknown arguments; so is a causal (left-to-right)
                        encoder's, with "causal": true, and one of another block kind than
                        BERT's, with "block" and "block_options". Other presets stay version 2.
    model.weights.npz   {canonical weight name: array} (checkpoints/weight_table.py names; also
                        `mlm/...`, `nsp/...` when a pretrainer saved its heads)
                        Version 1 stored each qkv kernel [H, 3H] and bias [3H]; they load
                        reshaped to [H, 3, N, H/N] and [3, N, H/N] (the same numbers).
    vocab.txt           one WordPiece token per line (optional; a BPE or SentencePiece
                        tokenizer writes its own files instead: its `save_files`)
    tokenizer.json      {"lowercase": true|false}

A save writes a temporary sibling directory and renames it into place, so a reader never sees
a half-written preset and an interrupted save leaves the old one intact.
"""

import json
import os
import shutil
import tempfile

import numpy as np

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.families.bert_config import ENCODER_CONFIG_KEYS

NAME = "keras_bert_suite preset directory"
FORMAT_MARKER = "keras_bert_suite"
FORMAT_VERSION = 3  # 3: per-layer sizes; 2: the qkv kernel is [H, 3, N, H/N] (1: [H, 3H])
UNPRUNED_FORMAT_VERSION = 2  # what a preset without per-layer sizes is written as
# Per-layer sizes of a pruned encoder (keras_bert_suite.pruning), kept when not None.
PER_LAYER_CONFIG_KEYS = ("layer_num_heads", "layer_intermediate_dims")
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.npz"
VOCABULARY_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
FILES_NEEDED = f"{CONFIG_FILE} with \"format\": \"{FORMAT_MARKER}\" + {WEIGHTS_FILE}"


def matches(directory, config_json):
    return config_json is not None and config_json.get("format") == FORMAT_MARKER


def save(directory, config, weight_map, vocabulary=None, lowercase=True):
    """Writes a preset directory.

    config: the encoder's config (only the architecture arguments are kept: name, dtype and
        return_hidden_states are choices of whoever loads it).
    weight_map: {canonical name: keras.Variable or array}.
    vocabulary: None, a vocab.txt path, a list of WordPiece tokens, or a tokenizer of ours,
        which writes its own files (`save_files`: vocab.txt, vocab.json + merges.txt, or
        the SentencePiece model).
    """
    directory = os.path.abspath(os.fspath(directory))
    _check_replaceable(directory)
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(directory)}.", dir=parent)
    try:
        architecture = {key: config[key] for key in ENCODER_CONFIG_KEYS if key in config}
        per_layer = {key: list(config[key]) for key in PER_LAYER_CONFIG_KEYS
                     if config.get(key) is not None}
        if config.get("causal"):  # a left-to-right encoder: older readers must not drop it
            per_layer["causal"] = True
        if config.get("block", "bert") != "bert":  # another block kind, and its settings
            per_layer.update(block=config["block"], block_options=config.get("block_options"))
        write_json(os.path.join(staging, CONFIG_FILE), {
            "format": FORMAT_MARKER,
            "format_version": FORMAT_VERSION if per_layer else UNPRUNED_FORMAT_VERSION,
            "class_name": "BertEncoder",
            "config": {**architecture, **per_layer},
        })
        np.savez(os.path.join(staging, WEIGHTS_FILE),
                 **{name: _to_numpy(value) for name, value in weight_map.items()})
        if hasattr(vocabulary, "save_files"):
            vocabulary.save_files(staging)
        elif vocabulary is not None:
            write_vocabulary(os.path.join(staging, VOCABULARY_FILE), vocabulary)
        write_json(os.path.join(staging, TOKENIZER_FILE), {"lowercase": bool(lowercase)})
        _move_into_place(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def load(directory, load_weights=True):
    config_path = os.path.join(directory, CONFIG_FILE)
    with open(config_path) as f:
        saved = json.load(f)
    version = saved.get("format_version", 0)
    if version > FORMAT_VERSION:
        raise UnsupportedCheckpointError(
            f"{config_path} has format_version {version}; this keras_bert_suite reads up to "
            f"{FORMAT_VERSION}. Upgrade keras_bert_suite.")
    weights = None
    if load_weights:
        with np.load(os.path.join(directory, WEIGHTS_FILE)) as archive:
            weights = {name: archive[name] for name in archive.files}
        if version < 2:
            weights = _split_qkv_heads(weights, saved["config"])
    return Checkpoint(config=dict(saved["config"]), weights=weights, format="ours")


def _split_qkv_heads(weights, config):
    """Version 1's [H, 3H] qkv kernels and [3H] biases as [H, 3, N, Dh] and [3, N, Dh]: the
    same memory order (query | key | value, then head-major), so a reshape is exact."""
    heads = config["num_heads"]
    head_dim = config["hidden_dim"] // heads
    upgraded = dict(weights)
    for name, value in weights.items():
        if name.endswith("/attention/qkv/kernel") and value.ndim == 2:
            upgraded[name] = value.reshape(value.shape[0], 3, heads, head_dim)
        elif name.endswith("/attention/qkv/bias") and value.ndim == 1:
            upgraded[name] = value.reshape(3, heads, head_dim)
    return upgraded


def _check_replaceable(directory):
    """Never replace a directory that is not one of our presets (or empty)."""
    if not os.path.exists(directory):
        return
    if not os.path.isdir(directory):
        raise FileExistsError(f"{directory} exists and is not a directory.")
    if not os.listdir(directory):
        return
    config_path = os.path.join(directory, CONFIG_FILE)
    try:
        with open(config_path) as f:
            is_ours = json.load(f).get("format") == FORMAT_MARKER
    except (OSError, ValueError):
        is_ours = False
    if not is_ours:
        raise FileExistsError(
            f"{directory} exists and is not a keras_bert_suite preset; refusing to replace it.")


def _move_into_place(staging, directory):
    if not os.path.exists(directory):
        os.rename(staging, directory)
        return
    # os.rename cannot replace a non-empty directory: swap the old one out, then delete it.
    retired = staging + ".old"
    os.rename(directory, retired)
    os.rename(staging, directory)
    shutil.rmtree(retired, ignore_errors=True)


def _to_numpy(value):
    if isinstance(value, np.ndarray):
        return value
    import keras

    return keras.ops.convert_to_numpy(value)


def write_vocabulary(path, vocabulary):
    """vocab.txt from a vocab.txt path (copied) or a token list (also used by the Google BERT
    writer)."""
    if isinstance(vocabulary, (str, os.PathLike)):
        shutil.copyfile(vocabulary, path)
        return
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{token}\n" for token in vocabulary)


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")

