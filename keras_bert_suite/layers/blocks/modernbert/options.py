"""ModernBERT's own settings (`EncoderConfig.block_options` of an encoder of block
"modernbert"), with the released checkpoints' defaults."""

import dataclasses

from keras_bert_suite.layers.modernbert_block import ROPE_THETA, attention_kind

ATTENTION_KINDS = ("global", "local")
POOLINGS = ("cls", "mean")


@dataclasses.dataclass(frozen=True)
class ModernBertOptions:
    """local_attention: a local layer's window; it sees keys with |i - j| <= local_attention // 2.
    global_attn_every_n_layers: layers 0, n, 2n, ... attend globally, the others locally.
    layer_types: None (that pattern), or each layer's "global" / "local" (transformers 5's
        `layer_types`, when a checkpoint's differ from the pattern).
    global_rope_theta, local_rope_theta: the rotary base of each kind of layer.
    classifier_pooling: what the pooler reads: "cls" ([CLS]'s row) or "mean" (the mean of
        the real tokens' rows), transformers' `classifier_pooling`.
    """

    local_attention: int = 128
    global_attn_every_n_layers: int = 3
    layer_types: list = None
    global_rope_theta: float = ROPE_THETA["global"]
    local_rope_theta: float = ROPE_THETA["local"]
    classifier_pooling: str = "cls"

    def __post_init__(self):
        if not isinstance(self.local_attention, int) or self.local_attention < 0:
            raise ValueError(f"local_attention must be a non-negative integer, got "
                             f"{self.local_attention!r}.")
        if not isinstance(self.global_attn_every_n_layers, int) or (
                self.global_attn_every_n_layers < 1):
            raise ValueError(f"global_attn_every_n_layers must be a positive integer, got "
                             f"{self.global_attn_every_n_layers!r}.")
        if self.layer_types is not None and any(
                kind not in ATTENTION_KINDS for kind in self.layer_types):
            raise ValueError(f"layer_types must list {ATTENTION_KINDS}, got "
                             f"{self.layer_types!r}.")
        if self.classifier_pooling not in POOLINGS:
            raise ValueError(f"classifier_pooling must be one of {POOLINGS}, got "
                             f"{self.classifier_pooling!r}.")

    @property
    def radius(self):
        return self.local_attention // 2

    def attention_kind(self, index):
        """"global" or "local": layer `index`'s attention."""
        if self.layer_types is not None:
            return self.layer_types[index]
        return attention_kind(index, self.global_attn_every_n_layers)

    def rope_theta(self, kind):
        return self.global_rope_theta if kind == "global" else self.local_rope_theta


def options_of(config):
    """The `ModernBertOptions` of an EncoderConfig (its `block_options`)."""
    return ModernBertOptions(**(config.block_options or {}))


def kept_options(block_options, layers):
    """The block_options of an encoder of `layers` (0-based) only: each keeps its attention
    kind, through `layer_types` where the kept kinds are not the options' pattern."""
    options = ModernBertOptions(**(block_options or {}))
    kinds = [options.attention_kind(index) for index in layers]
    kept = {key: value for key, value in (block_options or {}).items() if key != "layer_types"}
    pattern = [attention_kind(index, options.global_attn_every_n_layers)
               for index in range(len(layers))]
    if kinds != pattern:
        kept["layer_types"] = kinds
    return kept or None
