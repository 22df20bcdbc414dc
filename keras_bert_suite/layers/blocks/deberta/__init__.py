"""DeBERTa-v3's block (He et al. 2021, "DeBERTa"; v3: He et al. 2021, "DeBERTaV3"): BERT's
post-LayerNorm block around disentangled self-attention. Its weights are BERT's block's (the
query/key/value projections with biases, v3 sharing them with the relative embeddings), so
LoRA, pruning, the layout and the int8 export treat it as BERT's.

    options.py     DebertaOptions: the encoder's `block_options` (buckets, reach, terms)
    attention.py   DisentangledSelfAttention, the Keras layer
    layer.py       DebertaBlock, the Keras layer (BERT's block math around it)
    relative.py    RelativeEmbeddings: built once per encoder, the context every block takes
    pieces.py      what the kind adds around its blocks (`EncoderPieces`), Keras and serving
    serving.py     the block's serving form in TensorFlow ops
"""

from keras_bert_suite.layers.blocks import bert
from keras_bert_suite.layers.blocks.deberta import pieces, serving
from keras_bert_suite.layers.blocks.deberta.layer import DebertaBlock
from keras_bert_suite.layers.blocks.deberta.options import DebertaOptions, options_of
from keras_bert_suite.layers.blocks.kind import BlockKind


def make(config, index, policy, name):
    """Block `index` of an encoder of `config` (an EncoderConfig), pruned sizes as BERT's."""
    heads = config.block_num_heads[index]
    return DebertaBlock(
        heads, config.hidden_dim, config.block_intermediate_dims[index],
        position_terms=options_of(config).pos_att_type, dropout=config.dropout,
        layer_norm_epsilon=config.layer_norm_epsilon,
        initializer_range=config.initializer_range,
        head_dim=None if heads == config.num_heads else config.head_dim,
        activation=config.activation, dtype=policy, name=name)


BLOCK = BlockKind(
    name="deberta",
    layer=DebertaBlock,
    make=make,
    # BERT's block's weights and what each transform reads of them.
    weights=bert.WEIGHTS,
    modules=bert.MODULES,
    lora=bert.LORA,
    units=bert.UNITS,
    layout=bert.LAYOUT,
    serving_form=serving.form,
    precision_overrides=bert.BLOCK.precision_overrides,
    smoothed_inputs=bert.BLOCK.smoothed_inputs,
    output_norm=bert.BLOCK.output_norm,
    encoder=pieces.PIECES,
)

__all__ = ["BLOCK", "DebertaBlock", "DebertaOptions"]
