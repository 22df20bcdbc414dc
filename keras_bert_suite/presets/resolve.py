"""`resolve_checkpoint`, the one `from_preset` resolution path of the encoder, the task models
and the tokenizers: a built-in preset name or a path -> a `Checkpoint`.

A name that is neither a built-in preset nor an existing path gets an `UnknownPresetError`
naming the closest built-in preset and the formats a path may hold.
"""

import difflib
import os

from keras_bert_suite.checkpoint_errors import UnknownPresetError
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.detect import format_list, load_checkpoint
from keras_bert_suite.presets.builtin import PRESETS
from keras_bert_suite.presets.packaged import packaged_checkpoint_dir


def resolve_checkpoint(preset, load_weights=True):
    """Returns a `Checkpoint` for a built-in preset name or a checkpoint path.

    For an architecture-only preset the checkpoint has `weights=None` and no `directory`.
    Raises `UnknownPresetError` when `preset` is neither a built-in name nor an existing path.
    """
    if isinstance(preset, str) and preset in PRESETS:
        spec = PRESETS[preset]
        if spec.packaged_checkpoint:
            directory = packaged_checkpoint_dir(spec.packaged_checkpoint)
            return load_checkpoint(directory, load_weights=load_weights)
        return Checkpoint(config=dict(spec.config), weights=None, format="builtin")
    path = os.fspath(preset)
    # A Google checkpoint may be given by its prefix (".../bert_model.ckpt"), which is no file.
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise UnknownPresetError(unknown_preset_message(path))
    return load_checkpoint(path, load_weights=load_weights)


def unknown_preset_message(name):
    """What `name` is not, the closest built-in preset, and what it could have been."""
    lines = [f"{name!r} is neither a built-in preset nor an existing path."]
    closest = difflib.get_close_matches(os.path.basename(name.rstrip("/")), PRESETS, n=1)
    if closest:
        lines.append(f"Did you mean the built-in preset {closest[0]!r}?")
    lines.append(f"Built-in presets (`kbs presets` describes them): {', '.join(PRESETS)}.")
    lines.append("A path must be a directory in one of these formats (a Google BERT or Model "
                 "Garden checkpoint may also be named by its prefix, .../bert_model.ckpt):")
    lines.append(format_list())
    return "\n".join(lines)
