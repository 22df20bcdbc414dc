"""What DeBERTa-v3 adds to the encoder around its blocks (`BlockKind.encoder`): embeddings
without position rows; the relative embeddings and their LayerNorm, built once
(`relative.py`); the context every block takes, computed once per forward pass (which keys a
query sees, the normalized relative embeddings, the [T, T] bucket rows); BERT's pooler on
[CLS] (transformers' ContextPooler is dense + GELU: `pooler_activation` "gelu").
"""

from keras_bert_suite.layers import packed_rows
from keras_bert_suite.layers.blocks.deberta.options import DebertaOptions, options_of
from keras_bert_suite.layers.blocks.deberta.relative import RelativeEmbeddings
from keras_bert_suite.layers.blocks.encoder_pieces import EncoderPieces
from keras_bert_suite.layers.blocks.encoder_serving import BertServingPieces
from keras_bert_suite.layers.disentangled_attention import relative_embeddings
from keras_bert_suite.layers.relative_positions import relative_indices
from keras_bert_suite.layers.serving import tf_ops

# The relative embeddings [2 S, H] ("R" rows) and their LayerNorm.
WEIGHTS = {
    "relative_embeddings": ("R", "H"),
    "relative_embeddings/layer_norm/gamma": ("H",),
    "relative_embeddings/layer_norm/beta": ("H",),
}


def dimensions(config):
    """The weight table's symbols the kind adds: R, the relative embeddings' rows."""
    return {"R": DebertaOptions(**(config.get("block_options") or {})).relative_rows}


def layers(config, policy):
    options = options_of(config)
    relative = RelativeEmbeddings(
        config.hidden_dim, options.position_buckets, options.max_relative_positions,
        config.layer_norm_epsilon, config.initializer_range, dtype=policy,
        name="relative_embeddings")
    # By weight-table module (the table itself a lone variable, as the position table is),
    # and the layer that computes the context.
    return {"relative_embeddings": relative.embeddings,
            "relative_embeddings/layer_norm": relative.layer_norm,
            "relative_positions": relative}


def context(parts, inputs):
    """{"keep": [B, 1, T, T] (packed rows too: relative distances need no restart),
    "relative": [2 S, H], "indices": [T, T]}."""
    padding_mask = inputs["padding_mask"]
    return {"keep": packed_rows.attention_mask(padding_mask, causal=parts.causal),
            **parts.shared["relative_positions"](padding_mask)}


class DebertaServingPieces(BertServingPieces):
    """The same context in TensorFlow ops (a key padding mask), BERT's pooler."""

    def __init__(self, config, read):
        super().__init__(config, read)
        self.index_table = options_of(config).index_table()
        self.epsilon = float(config.layer_norm_epsilon)

    def context(self, inputs, batch, length):
        read = self.read
        keep = tf_ops.cast(inputs["padding_mask"], "bool")[:, None, None, :]  # [B, 1, 1, T]
        relative = relative_embeddings(
            read("relative_embeddings"), read("relative_embeddings/layer_norm/gamma"),
            read("relative_embeddings/layer_norm/beta"), self.epsilon, tf_ops)
        return {"keep": keep, "relative": relative,
                "indices": relative_indices(length, self.index_table, tf_ops)}


PIECES = EncoderPieces(options=DebertaOptions, position_rows=False, weights=WEIGHTS,
                       layers=layers, context=context, serving=DebertaServingPieces,
                       dimensions=dimensions)
