"""BERT's post-LayerNorm block (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA, ALBERT): its
declarations for every transform of the library (`blocks/kind.py` says what each means).

    layer.py     the Keras layer (TransformerBlock) and its sublayers
    math.py      the block's forward pass, once for training and serving
    serving.py   its serving form: the math over TensorFlow forms of the sublayers
"""

from keras_bert_suite.layers.blocks.bert import serving
from keras_bert_suite.layers.blocks.bert.layer import TransformerBlock
from keras_bert_suite.layers.blocks.kind import BLOCK_INPUT, MODEL_AXIS, BlockKind, Units

# The table's rows of one block, in checkpoint order. qkv: query | key | value, head,
# dimension within the head (a model-parallel layout gives each device whole heads).
WEIGHTS = {
    "attention/qkv/kernel": ("H", 3, "N", "Dh"),
    "attention/qkv/bias": (3, "N", "Dh"),
    "attention/output/kernel": ("H", "H"),
    "attention/output/bias": ("H",),
    "attention_layer_norm/gamma": ("H",),
    "attention_layer_norm/beta": ("H",),
    "intermediate/kernel": ("H", "I"),
    "intermediate/bias": ("I",),
    "output/kernel": ("I", "H"),
    "output/bias": ("H",),
    "output_layer_norm/gamma": ("H",),
    "output_layer_norm/beta": ("H",),
}

MODULES = {
    "attention/qkv": lambda block: block.attention.qkv,
    "attention/output": lambda block: block.attention.output_dense,
    "attention_layer_norm": lambda block: block.attention_layer_norm,
    "intermediate": lambda block: block.intermediate_dense,
    "output": lambda block: block.output_dense,
    "output_layer_norm": lambda block: block.output_layer_norm,
}

# LoRA on the fused query/key/value [H, 3H], the attention output [H, H] and the
# feed-forward [H, I] and [I, H] projections.
LORA = ("attention/qkv", "attention/output", "intermediate", "output")

UNITS = {
    # Removing head h drops its query, key and value columns and its rows of the attention
    # output kernel ([N Dh, H], head-major rows).
    "heads": Units(
        "attention heads", lambda block: block.attention.num_heads, "layer_num_heads",
        "num_heads", {"attention/qkv/kernel": (2, 1), "attention/qkv/bias": (1, 1),
                      "attention/output/kernel": (0, 1)},
        output="attention/output/kernel"),
    # Removing neuron j drops column j of the first feed-forward kernel and bias, row j of
    # the second.
    "neurons": Units(
        "feed-forward neurons", lambda block: block.intermediate_dim,
        "layer_intermediate_dims", "intermediate_dim",
        {"intermediate/kernel": (1, 1), "intermediate/bias": (0, 1), "output/kernel": (0, 1)},
        output="output/kernel", input="intermediate/kernel"),
}

# Megatron-style (Shoeybi et al. 2019, section 3): whole heads per device (the qkv kernel on
# its head axis, the attention output by rows, whose head-major order gives every device the
# same heads), the FFN's first kernel by columns and its second by rows; one all-reduce per
# pair of matmuls. LayerNorms and the biases added after an all-reduce are replicated.
LAYOUT = {
    "attention/qkv/kernel": (None, None, MODEL_AXIS, None),  # [H, 3, N, Dh]
    "attention/qkv/bias": (None, MODEL_AXIS, None),  # [3, N, Dh]
    "attention/output/kernel": (MODEL_AXIS, None),  # [N * Dh, H]
    "intermediate/kernel": (None, MODEL_AXIS),  # [H, I]
    "intermediate/bias": (MODEL_AXIS,),  # [I]
    "output/kernel": (MODEL_AXIS, None),  # [I, H]
}


def make(config, index, policy, name):
    """Block `index` of an encoder of `config` (an EncoderConfig): a pruned block keeps the
    unpruned head size with its own number of heads and feed-forward width."""
    heads = config.block_num_heads[index]
    return TransformerBlock(
        heads, config.hidden_dim, config.block_intermediate_dims[index],
        dropout=config.dropout, layer_norm_epsilon=config.layer_norm_epsilon,
        initializer_range=config.initializer_range,
        # the unpruned head size (None keeps an unpruned block's config as it was)
        head_dim=None if heads == config.num_heads else config.head_dim,
        activation=config.activation, dtype=policy, name=name)


BLOCK = BlockKind(
    name="bert",
    layer=TransformerBlock,
    make=make,
    weights=WEIGHTS,
    modules=MODULES,
    lora=LORA,
    units=UNITS,
    layout=LAYOUT,
    serving_form=serving.form,
    # The FFN output's inputs (GELU activations) span the widest uint8 range: it multiplies
    # bf16 under int8_vnni (worst MiniLM sentence-embedding cosine to float32 0.994 with it
    # in int8, 0.998 in bf16, both calibrated; docs/export.md).
    precision_overrides={"output/kernel": {"int8_vnni": "bfloat16"}},
    smoothed_inputs={"attention/qkv/kernel": BLOCK_INPUT,
                     "intermediate/kernel": "attention_layer_norm"},
    output_norm="output_layer_norm",
)
