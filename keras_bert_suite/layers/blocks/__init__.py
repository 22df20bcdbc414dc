"""Block kinds: the encoder is a schedule of blocks of one kind (`EncoderConfig.block`).

Each kind lives in its own folder and declares what every transform needs (`kind.py`); this
registry is the one place that lists them. A new kind adds its folder and one line here.
"""

from keras_bert_suite.layers.blocks import bert, deberta, modernbert
from keras_bert_suite.layers.blocks.kind import BLOCK_INPUT, MODEL_AXIS, BlockKind, Units

BLOCK_KINDS = {kind.name: kind for kind in (bert.BLOCK, modernbert.BLOCK, deberta.BLOCK)}


def block_kind(name):
    """The `BlockKind` registered as `name`, or a ValueError naming the kinds there are."""
    if name not in BLOCK_KINDS:
        raise ValueError(f"block must be one of {sorted(BLOCK_KINDS)}, got {name!r}.")
    return BLOCK_KINDS[name]


__all__ = ["BLOCK_INPUT", "BLOCK_KINDS", "MODEL_AXIS", "BlockKind", "Units", "block_kind"]
