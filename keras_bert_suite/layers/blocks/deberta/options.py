"""DeBERTa-v3's own settings: the encoder's `block_options` for block "deberta", checked once.

>>> DebertaOptions(position_buckets=8, max_relative_positions=16).relative_rows
16
"""

import dataclasses

from keras_bert_suite.layers.relative_positions import relative_index_table

# transformers' `pos_att_type` terms: content to position, position to content.
POSITION_TERMS = ("c2p", "p2c")


@dataclasses.dataclass(frozen=True)
class DebertaOptions:
    """position_buckets: S, the relative embeddings' 2 S rows; distances beyond S / 2 share
        log-spaced buckets (v3: 256). 0 or less: no buckets, a row per distance (v2).
    max_relative_positions: the distance the last bucket reaches (v3: transformers' -1, which
        means max_position_embeddings, 512).
    pos_att_type: the position terms the attention adds to content-to-content, any of "c2p"
        and "p2c" (v3: both).
    """

    position_buckets: int = 256
    max_relative_positions: int = 512
    pos_att_type: tuple = ("p2c", "c2p")

    def __post_init__(self):
        for name in ("position_buckets", "max_relative_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}.")
        if self.max_relative_positions < 1:
            raise ValueError(f"max_relative_positions must be at least 1 (transformers' -1 "
                             f"means max_position_embeddings: give that number), got "
                             f"{self.max_relative_positions}.")
        terms = self.pos_att_type
        if isinstance(terms, str) or any(term not in POSITION_TERMS for term in terms) or (
                len(set(terms)) != len(terms)):
            raise ValueError(f"pos_att_type must be a list of distinct terms out of "
                             f"{list(POSITION_TERMS)}, got {terms!r}.")
        object.__setattr__(self, "pos_att_type", tuple(terms))
        relative_index_table(self.position_buckets, self.max_relative_positions)  # checks

    @property
    def relative_rows(self):
        """2 S: the rows of the relative embeddings."""
        span = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
        return 2 * span

    def index_table(self):
        """int32 [2 M + 1]: the relative-embedding row of each distance
        (`relative_positions.relative_index_table`)."""
        return relative_index_table(self.position_buckets, self.max_relative_positions)


def options_of(config):
    """The DebertaOptions of an encoder config (its `block_options`, or v3's defaults)."""
    return DebertaOptions(**(getattr(config, "block_options", None) or {}))
