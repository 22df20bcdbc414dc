"""`load_checkpoint`: finds out which format a path holds and hands it to that reader."""

import json
import os

from keras_bert_suite.checkpoint_errors import UnknownCheckpointFormatError
from keras_bert_suite.checkpoints import (
    google_bert, huggingface, keras_hub, model_garden, preset_dir)

# Checked in this order: the two formats whose config.json carries an explicit marker come
# before Hugging Face, whose config.json is recognised by its "model_type" key. Model Garden
# and Google BERT directories look alike (bert_config.json + a checkpoint); Model Garden's
# `matches` looks inside the checkpoint for TF2 object paths, and Google's takes the rest.
READERS = (preset_dir, keras_hub, huggingface, model_garden, google_bert)


def load_checkpoint(path, load_weights=True):
    """Reads a BERT checkpoint directory of any supported format into a `Checkpoint`.

    `path` is a directory (ours, Hugging Face, original Google BERT, TF Model Garden or KerasHub
    preset) or the prefix of a TensorFlow checkpoint (`.../bert_model.ckpt`), TF1 (Google) or
    TF2 (Model Garden), with bert_config.json (or albert_config.json) beside it. With
    `load_weights=False` only the config is read.
    """
    path = os.path.abspath(os.fspath(path))
    if not os.path.isdir(path) and os.path.exists(path + ".index"):
        reader = model_garden if model_garden.is_object_based(path) else google_bert
        return _read_from(os.path.dirname(path), reader.load(
            os.path.dirname(path), load_weights, checkpoint_prefix=path))
    if not os.path.isdir(path):
        raise UnknownCheckpointFormatError(
            f"{path} is not a directory (or a TensorFlow checkpoint prefix).\n"
            f"{formats_looked_for()}")
    config_json = _read_config_json(path)
    for reader in READERS:
        if reader.matches(path, config_json):
            return _read_from(path, reader.load(path, load_weights=load_weights))
    present = sorted(os.listdir(path))[:20]
    raise UnknownCheckpointFormatError(
        f"{path} is not a checkpoint directory this library recognises (it holds: "
        f"{present}).\n{formats_looked_for()}")


def _read_from(directory, checkpoint):
    """The reader's checkpoint with the directory it came from, where its tokenizer's files
    are (each tokenizer class reads its own: text/tokenizer_files.py)."""
    checkpoint.directory = directory
    return checkpoint


def formats_looked_for():
    return "Formats looked for, and the files each needs:\n" + format_list()


def format_list():
    """One line per supported directory format: its name and the files it needs."""
    return "\n".join(f"  - {reader.NAME}: {reader.FILES_NEEDED}" for reader in READERS)


def _read_config_json(directory):
    config_path = os.path.join(directory, "config.json")
    if not os.path.exists(config_path):
        return None
    try:
        with open(config_path) as f:
            value = json.load(f)
    except ValueError as error:
        raise UnknownCheckpointFormatError(f"{config_path} is not valid JSON: {error}") from None
    return value if isinstance(value, dict) else None
