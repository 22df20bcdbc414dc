"""ModernBERT's block (Warner et al. 2024): pre-LayerNorm, no biases, GeGLU feed-forward, rotary
attention, global on every n-th layer and within a sliding window on the others; its
declarations for every transform of the library (`blocks/kind.py` says what each means).

    layer.py     the Keras layer (ModernBertBlock); the math: layers/modernbert_block.py
    pieces.py    what it adds around the blocks (embeddings' form, context, final norm, pooler)
    options.py   its settings (`EncoderConfig.block_options`)
    serving.py   its serving forms: the same math over TensorFlow ops
"""

from keras_bert_suite.layers.blocks.encoder_pieces import EncoderPieces
from keras_bert_suite.layers.blocks.kind import MODEL_AXIS, BlockKind, Units
from keras_bert_suite.layers.blocks.modernbert import pieces, serving
from keras_bert_suite.layers.blocks.modernbert.layer import ModernBertBlock
from keras_bert_suite.layers.blocks.modernbert.options import (
    ModernBertOptions, kept_options, options_of)

# The table's rows of one block, in transformers' order. qkv: query | key | value, head,
# dimension within the head (transformers' fused Wqkv, transposed); feed_forward_input: the
# GeGLU's inputs then its gates (Wi, transposed).
WEIGHTS = {
    "attention_norm/gamma": ("H",),
    "attention/qkv/kernel": ("H", 3, "N", "Dh"),
    "attention/output/kernel": ("H", "H"),
    "feed_forward_norm/gamma": ("H",),
    "feed_forward_input/kernel": ("H", "2I"),
    "feed_forward_output/kernel": ("I", "H"),
}

MODULES = {
    "attention_norm": lambda block: block.attention_norm,
    "attention/qkv": lambda block: block.qkv,
    "attention/output": lambda block: block.attention_output,
    "feed_forward_norm": lambda block: block.feed_forward_norm,
    "feed_forward_input": lambda block: block.feed_forward_input,
    "feed_forward_output": lambda block: block.feed_forward_output,
}

# LoRA on transformers' Wqkv, Wo, mlp.Wi and mlp.Wo.
LORA = ("attention/qkv", "attention/output", "feed_forward_input", "feed_forward_output")

UNITS = {
    # Head h: its query, key and value columns, its rows of the output kernel.
    "heads": Units(
        "attention heads", lambda block: block.num_heads, "layer_num_heads", "num_heads",
        {"attention/qkv/kernel": (2, 1), "attention/output/kernel": (0, 1)},
        output="attention/output/kernel"),
    # Neuron j: an input / gate pair, columns j and I + j of W_i, and row j of W_o.
    "neurons": Units(
        "feed-forward neurons", lambda block: block.intermediate_dim,
        "layer_intermediate_dims", "intermediate_dim",
        {"feed_forward_input/kernel": (1, 2), "feed_forward_output/kernel": (0, 1)},
        output="feed_forward_output/kernel", input="feed_forward_input/kernel"),
}

# Megatron-style, as BERT's: whole heads per device, W_i by columns and W_o by rows. (A
# device's W_i columns are a contiguous run, not its neurons' input / gate pairs: the
# partitioner moves the gates; a split by pairs would want W_i stored [H, 2, I].)
LAYOUT = {
    "attention/qkv/kernel": (None, None, MODEL_AXIS, None),  # [H, 3, N, Dh]
    "attention/output/kernel": (MODEL_AXIS, None),  # [N * Dh, H]
    "feed_forward_input/kernel": (None, MODEL_AXIS),  # [H, 2 I]
    "feed_forward_output/kernel": (MODEL_AXIS, None),  # [I, H]
}


def make(config, index, policy, name):
    """Block `index` of an encoder of `config`: global or local as the options say."""
    options = options_of(config)
    heads = config.block_num_heads[index]
    return ModernBertBlock(
        heads, config.hidden_dim, config.block_intermediate_dims[index],
        attention=options.attention_kind(index), radius=options.radius, first=index == 0,
        dropout=config.dropout, layer_norm_epsilon=config.layer_norm_epsilon,
        initializer_range=config.initializer_range,
        head_dim=None if heads == config.num_heads else config.head_dim,
        activation=config.activation, dtype=policy, name=name)


def absent(config, index):
    """Block 0 has no attention norm (transformers' Identity)."""
    return frozenset({"attention_norm/gamma"}) if index == 0 else frozenset()


# Embeddings without position rows (the blocks rotate queries and keys) and with a bias-free
# LayerNorm; a final norm after the last block; transformers' ModernBertPredictionHead as the
# pooler, on [CLS] or the mean of the real tokens (`classifier_pooling`), and on every token
# for the token-level heads (transformers' token classifier and QA model run it so).
PIECES = EncoderPieces(
    options=ModernBertOptions,
    position_rows=False,
    embedding_norm_bias=False,
    weights={"final_norm/gamma": ("H",)},
    layers=pieces.encoder_layers,
    context=pieces.context,
    finish=pieces.finish,
    pooler_weights={"pooler/dense/kernel": ("H", "H"), "pooler/norm/gamma": ("H",)},
    pooler=pieces.pooler,
    pool=pieces.pool,
    serving=serving.ServingPieces,
    mlm_bias=False,
    tokens_through_pooler=True,
    kept_options=kept_options,
)

BLOCK = BlockKind(
    name="modernbert",
    layer=ModernBertBlock,
    make=make,
    weights=WEIGHTS,
    modules=MODULES,
    lora=LORA,
    units=UNITS,
    layout=LAYOUT,
    serving_form=serving.form,
    # GeGLU products span a wider range than GELU's: W_o keeps bf16 under int8_vnni, as
    # BERT's FFN output does.
    precision_overrides={"feed_forward_output/kernel": {"int8_vnni": "bfloat16"}},
    # int8_vnni smooths the matmuls its norms feed (block 0's qkv: the embeddings' norm, as
    # it has no attention norm). A random 4-layer ModernBERT with one norm channel 20x the
    # others, 128 SOTU sentences: worst mean-pooled cosine to float32 0.99997 unsmoothed,
    # 0.999997 estimated from the norms' weights, 0.999998 calibrated on 64 sentences.
    smoothed_inputs={"attention/qkv/kernel": "attention_norm",
                     "feed_forward_input/kernel": "feed_forward_norm"},
    output_norm=None,
    encoder=PIECES,
    absent=absent,
)
