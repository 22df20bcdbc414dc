"""What a block kind adds to the encoder around its blocks (`BlockKind.encoder`): the
embeddings' form, layers built once per encoder, the context every block takes, what runs
after the last block, and the pooler. The defaults are BERT's.

The Keras encoder (`models/encoder.py`) calls the Keras pieces with its `EncoderParts`
(`parts.config`, `parts.shared`: the layers `layers` built, `parts.pooler`, `parts.causal`);
the serving graph (`export/serving_encoder.py`) asks `serving(config, read)` for the same
pieces in TensorFlow ops on 2-D activations [B T, H].
"""

from typing import Callable, NamedTuple, Optional

import keras

from keras_bert_suite.layers import packed_rows
from keras_bert_suite.layers.blocks.encoder_serving import BertServingPieces
from keras_bert_suite.layers.initializer import BertInitializer

# BERT's pooler: a dense layer and the config's `pooler_activation` on [CLS]'s row.
POOLER_WEIGHTS = {
    "pooler/kernel": ("H", "H"),
    "pooler/bias": ("H",),
}


def no_layers(config, policy):
    return {}


def attention_mask(parts, inputs):
    """BERT's context: the [B, 1, T, T] attention mask (packed rows and causal encoders
    included, `packed_rows.attention_mask`)."""
    return packed_rows.attention_mask(inputs["padding_mask"], causal=parts.causal)


def unchanged(parts, x):
    return x


def dense_pooler(config, policy):
    return keras.layers.Dense(
        config.hidden_dim, activation=config.pooler_activation,
        kernel_initializer=BertInitializer(stddev=config.initializer_range), dtype=policy,
        name="pooler")


def same_options(block_options, layers):
    """A kind whose options say nothing per layer: a student keeps them as they are."""
    return block_options


def first_token(parts, x, inputs):
    """The pooler on [CLS]'s row (the first)."""
    return parts.pooler(x[:, 0, :])


class EncoderPieces(NamedTuple):
    """options: None, or a frozen dataclass of the kind's own settings: the encoder's
        `block_options` dict (its keys the dataclass' fields) is checked by building it.
    position_rows: whether the embeddings add learned absolute position rows.
    embedding_norm_bias: whether the embeddings' LayerNorm has an offset (beta).
    weights: {template: shape symbols} of the layers built once per encoder (the weight
        table places them after the blocks; a template's module is a key of `layers`).
    layers: (EncoderConfig, dtype policy) -> {module: Keras layer}, built once.
    context: (parts, inputs) -> what every block takes besides x, computed once per pass.
    finish: (parts, x) -> x after the last block.
    pooler_weights: {template: shape symbols} of the pooler ("pooler/..."; a module
        "pooler/a/b" is the pooler layer's attribute `a.b`).
    pooler: (EncoderConfig, dtype policy) -> the pooler layer.
    pool: (parts, x [B, T, H], inputs) -> the pooled output [B, H].
    serving: (EncoderConfig, read) -> an object with `context(inputs, batch, length)`,
        `finish(x)` and `pool(x, inputs, batch, length)` in TensorFlow ops; `read(name)`
        gives an encoder weight by its canonical name.
    mlm_bias: whether the masked-LM head's transform and LayerNorm have biases (BERT's
        `cls/predictions`; ModernBERT's prediction head has none).
    dimensions: (config as a dict) -> {shape symbol: size} the kind's `weights` use beyond
        the table's own (DeBERTa's "R": its relative embeddings' rows).
    tokens_through_pooler: whether token-level heads (tags, spans) read every token's row
        through the pooler instead of the last layer's rows as they are (ModernBERT's task
        classes run their prediction head, our pooler, on each token).
    kept_options: (block_options dict or None, kept layers: 0-based indices) -> the
        block_options of an encoder made of those layers only (a distillation student):
        per-layer settings follow their layers (ModernBERT's attention kinds).
    """

    options: Optional[type] = None
    position_rows: bool = True
    embedding_norm_bias: bool = True
    weights: dict = {}
    layers: Callable = no_layers
    context: Callable = attention_mask
    finish: Callable = unchanged
    pooler_weights: dict = POOLER_WEIGHTS
    pooler: Callable = dense_pooler
    pool: Callable = first_token
    serving: Callable = BertServingPieces
    mlm_bias: bool = True
    dimensions: Callable = lambda config: {}
    tokens_through_pooler: bool = False
    kept_options: Callable = same_options


def checked_options(pieces, block, options):
    """`options` (a dict or None) as the kind's options dataclass; a ValueError names the
    fields a kind takes."""
    options = dict(options or {})
    if pieces.options is None:
        if options:
            raise ValueError(f"block {block!r} takes no block_options, got {sorted(options)}.")
        return None
    try:
        return pieces.options(**options)
    except TypeError as error:
        raise ValueError(f"block_options of block {block!r}: {error}") from None
