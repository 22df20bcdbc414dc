"""The canonical weight names and their shapes: the one table that the model
(`models/weight_names.py`) and every checkpoint converter read.

    embeddings/token_embedding                 [V, E]
    embeddings/segment_embedding               [S, E]   (none when S = 0: DistilBERT)
    embeddings/position_embedding              [P, E]
    embeddings/layer_norm/{gamma,beta}         [E]
    embeddings/projection/{kernel,bias}        [E, H], [H]  (only with an embedding_dim)
    layer_{i}/attention/qkv/kernel             [H, 3, N, H/N]  (query | key | value, head,
    layer_{i}/attention/qkv/bias               [3, N, H/N]      dimension within the head)
    layer_{i}/attention/output/{kernel,bias}   [H, H], [H]
    layer_{i}/attention_layer_norm/{gamma,beta}
    layer_{i}/intermediate/{kernel,bias}       [H, I], [I]
    layer_{i}/output/{kernel,bias}             [I, H], [H]
    layer_{i}/output_layer_norm/{gamma,beta}
    pooler/{kernel,bias}                       [H, H], [H]

Pretraining heads (BertPretrainer; `cls/predictions`, `cls/seq_relationship` in checkpoints):
    mlm/transform/{kernel,bias}                [H, E], [E]
    mlm/layer_norm/{gamma,beta}                [E]
    mlm/output_bias                            [V]  (the decoder matrix is the token embedding)
    nsp/{kernel,bias}                          [H, 2], [2]
    rtd/dense/{kernel,bias}                    [H, H], [H]  (ELECTRA's discriminator,
    rtd/prediction/{kernel,bias}               [H, 1], [1]   ReplacedTokenDetector)

V vocabulary_size, S num_segments, P max_sequence_length + position_offset, E embedding_dim
(H when None), H hidden_dim, I intermediate_dim, N num_heads. `layer_{i}` numbers the distinct
transformer blocks: ALBERT's layers share theirs (num_layer_groups x layers_per_group blocks).
Kernels are [in, out] (Keras layout); converters transpose PyTorch's [out, in].
The qkv kernel in memory is the [H, 3H] concatenation of the query, key and value kernels
(each head-major, as BERT splits heads); its head axis is separate so that a model-parallel
layout can give each device whole heads (`BertEncoder.get_layout_map`). Files written before
it stored that [H, 3H] array and load reshaped: preset directories of format_version 1
(`preset_dir.load`), `.keras` and `.weights.h5` files (the attention layer's qkv projection).

A transformer layer's rows are its block kind's (`BlockKind.weights`, `layers/blocks/`: the
`layer_{i}/...` rows above are BERT's block, `layers/blocks/bert/`), less those a block lacks
(`BlockKind.absent`); the encoder's config names the kind (`block`, default "bert"). The kind
also says which embedding rows there are (`EncoderPieces.position_rows`,
`embedding_norm_bias`), adds the rows of the layers it builds once per encoder after the blocks
(`EncoderPieces.weights`, e.g. a final norm) and gives the pooler's rows
(`EncoderPieces.pooler_weights`; BERT's `pooler/{kernel,bias}` above).

A name is a *template* (`attention/qkv/kernel`) placed under `layer_{i}/` for each transformer
layer, or used as it is for the embeddings, the pooler and the heads. A template's *module* is
the template less its last part when that part is a variable (`kernel`, `bias`, `gamma`,
`beta`), else the whole template (the embeddings, `mlm/output_bias`). Converters map modules or
templates to their own names, and iterate this table, so they produce exactly these names.
"""

from typing import NamedTuple, Optional

from keras_bert_suite.layers.blocks import BLOCK_KINDS, block_kind
from keras_bert_suite.layers.blocks.encoder_pieces import POOLER_WEIGHTS

EMBEDDING_WEIGHTS = {
    "embeddings/token_embedding": ("V", "E"),
    "embeddings/segment_embedding": ("S", "E"),
    "embeddings/position_embedding": ("P", "E"),
    "embeddings/layer_norm/gamma": ("E",),
    "embeddings/layer_norm/beta": ("E",),
    "embeddings/projection/kernel": ("E", "H"),
    "embeddings/projection/bias": ("H",),
}
MLM_HEAD_WEIGHTS = {
    "mlm/transform/kernel": ("H", "E"),
    "mlm/transform/bias": ("E",),
    "mlm/layer_norm/gamma": ("E",),
    "mlm/layer_norm/beta": ("E",),
    "mlm/output_bias": ("V",),
}
NSP_HEAD_WEIGHTS = {
    "nsp/kernel": ("H", 2),
    "nsp/bias": (2,),
}
# ELECTRA's discriminator: is each token the original or a replacement (dense -> act -> 1).
RTD_HEAD_WEIGHTS = {
    "rtd/dense/kernel": ("H", "H"),
    "rtd/dense/bias": ("H",),
    "rtd/prediction/kernel": ("H", 1),
    "rtd/prediction/bias": (1,),
}
# What a masked-LM head without biases lacks (`EncoderPieces.mlm_bias`).
MLM_BIASES = ("mlm/transform/bias", "mlm/layer_norm/beta")
# The pretraining heads, each loaded only when a checkpoint has it.
HEAD_WEIGHTS = {"mlm": MLM_HEAD_WEIGHTS, "nsp": NSP_HEAD_WEIGHTS, "rtd": RTD_HEAD_WEIGHTS}

VARIABLES = ("kernel", "bias", "gamma", "beta")


class Weight(NamedTuple):
    name: str  # "layer_3/attention/qkv/kernel"
    template: str  # "attention/qkv/kernel"
    layer: Optional[int]  # 3; None outside the transformer layers
    shape: tuple  # from the config; () when the table was read without one


def layer_weight_name(index, template):
    return f"layer_{index}/{template}"


def split_template(template):
    """"attention/qkv/kernel" -> ("attention/qkv", "kernel"); an embedding -> (itself, None)."""
    module, _, variable = template.rpartition("/")
    return (module, variable) if variable in VARIABLES else (template, None)


def _kind(config):
    return block_kind(config.get("block") or "bert")


def layer_weights(config, index=None):
    """{template: shape symbols} of one transformer layer of an encoder of `config`: its block
    kind's rows, each named `layer_{i}/<template>` (block `index`'s only, when given)."""
    kind = _kind(config)
    if index is None:
        return kind.weights
    absent = kind.absent(config, index)
    return {template: symbols for template, symbols in kind.weights.items()
            if template not in absent}


def templates():
    """Every template of the table (every block kind's), encoder and heads, in table order."""
    kinds = BLOCK_KINDS.values()
    block_templates = dict.fromkeys(template for kind in kinds for template in kind.weights)
    encoder_templates = dict.fromkeys(
        template for kind in kinds
        for template in (*kind.encoder.weights, *kind.encoder.pooler_weights))
    return [*EMBEDDING_WEIGHTS, *block_templates, *encoder_templates,
            *(template for head in HEAD_WEIGHTS.values() for template in head)]


def modules():
    """Every module of the table (see the module docstring), in table order, once each."""
    return list(dict.fromkeys(split_template(template)[0] for template in templates()))


def dimensions(config):
    hidden, heads = config["hidden_dim"], config["num_heads"]
    return {"V": config["vocabulary_size"], "S": config["num_segments"],
            "P": config["max_sequence_length"] + config.get("position_offset", 0),
            "E": config.get("embedding_dim") or hidden, "H": hidden,
            "I": config["intermediate_dim"], "2I": 2 * config["intermediate_dim"], "N": heads,
            "Dh": hidden // heads, **_kind(config).encoder.dimensions(config)}


def num_blocks(config):
    """The distinct transformer blocks: num_layers, or ALBERT's groups x layers per group."""
    groups = config.get("num_layer_groups")
    return config["num_layers"] if groups is None else groups * config.get("layers_per_group", 1)


def _has(template, config):
    """Whether an encoder of `config` has this embedding weight."""
    pieces = _kind(config).encoder
    if template.startswith("embeddings/segment_embedding"):
        return config["num_segments"] > 0
    if template.startswith("embeddings/projection/"):
        return config.get("embedding_dim") is not None
    if template == "embeddings/position_embedding":
        return pieces.position_rows
    if template == "embeddings/layer_norm/beta":
        return pieces.embedding_norm_bias
    return True


def encoder_weights(config, shapes=True):
    """The encoder's `Weight`s in checkpoint order: embeddings, layers, the block kind's layers
    built once, pooler, those that an encoder of `config` (a `BertEncoder` config) has.
    `shapes=False` leaves the shapes empty (a pruned encoder's differ from layer to layer;
    the model's variables know them)."""
    sizes = dimensions(config) if shapes else None
    weights = [_weight(name, name, None, symbols, sizes)
               for name, symbols in EMBEDDING_WEIGHTS.items() if _has(name, config)]
    for index in range(num_blocks(config)):
        weights += [_weight(layer_weight_name(index, template), template, index, symbols, sizes)
                    for template, symbols in layer_weights(config, index).items()]
    pieces = _kind(config).encoder
    weights += [_weight(name, name, None, symbols, sizes)
                for name, symbols in {**pieces.weights, **pieces.pooler_weights}.items()]
    return weights


def head_weights(head, config=None):
    """The `Weight`s of one pretraining head ("mlm", "nsp" or "rtd"); with a `config`, those
    an encoder of it has (no masked-LM biases where the block kind says so)."""
    sizes = dimensions(config) if config is not None else None
    rows = HEAD_WEIGHTS[head]
    if config is not None and not _kind(config).encoder.mlm_bias:
        rows = {name: symbols for name, symbols in rows.items() if name not in MLM_BIASES}
    return [_weight(name, name, None, symbols, sizes) for name, symbols in rows.items()]


def encoder_weight_shapes(config):
    """{canonical encoder weight name: shape} for `config`, in checkpoint order."""
    return {weight.name: weight.shape for weight in encoder_weights(config)}


def head_weight_shapes(head, config):
    return {weight.name: weight.shape for weight in head_weights(head, config)}


def resolve_shape(symbols, sizes):
    """("H", 3, "N", "Dh") and `dimensions(config)` -> (384, 3, 12, 32)."""
    return tuple(sizes[symbol] if isinstance(symbol, str) else symbol for symbol in symbols)


def _weight(name, template, layer, symbols, sizes):
    shape = () if sizes is None else resolve_shape(symbols, sizes)
    return Weight(name, template, layer, shape)
