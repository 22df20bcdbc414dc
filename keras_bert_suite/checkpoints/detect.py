"""`load_checkpoint`: finds out which format a path holds and hands it to that reader."""

import json
import os

from keras_bert_suite.checkpoints import google_bert, huggingface, keras_hub, preset_dir
from keras_bert_suite.checkpoints.errors import UnknownCheckpointFormatError

# Checked in this order: the two formats whose config.json carries an explicit marker come
# before Hugging Face, whose config.json is recognised by its "model_type" key.
READERS = (preset_dir, keras_hub, huggingface, google_bert)


def load_checkpoint(path, load_weights=True):
    """Reads a BERT checkpoint directory of any supported format into a `Checkpoint`.

    `path` is a directory (ours, Hugging Face, original Google BERT or KerasHub preset) or the
    prefix of a Google TensorFlow checkpoint (`.../bert_model.ckpt`). With
    `load_weights=False` only the config, vocabulary and casing are read.
    """
    path = os.path.abspath(os.fspath(path))
    if not os.path.isdir(path) and os.path.exists(path + ".index"):
        return google_bert.load(os.path.dirname(path), load_weights, checkpoint_prefix=path)
    if not os.path.isdir(path):
        raise UnknownCheckpointFormatError(
            f"{path} is not a directory (or a TensorFlow checkpoint prefix).\n"
            f"{formats_looked_for()}")
    config_json = _read_config_json(path)
    for reader in READERS:
        if reader.matches(path, config_json):
            return reader.load(path, load_weights=load_weights)
    present = sorted(os.listdir(path))[:20]
    raise UnknownCheckpointFormatError(
        f"{path} is not a checkpoint directory this library recognises (it holds: "
        f"{present}).\n{formats_looked_for()}")


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
