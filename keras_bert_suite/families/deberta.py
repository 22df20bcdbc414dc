"""DeBERTa-v3 (He et al. 2021, "DeBERTaV3"; transformers' model_type "deberta-v2"): block kind
"deberta" (BERT's post-LayerNorm block around disentangled attention, `layers/blocks/deberta/`),
embeddings without position rows, relative embeddings shared by every layer, a ContextPooler
(dense + GELU on [CLS]) that transformers keeps in its task classes, not in the base model.

Only v3's settings are read: relative attention with the projections shared
(`share_att_key`), a LayerNorm on the relative embeddings, no absolute positions in the input.
DeBERTa-v2's other options (its convolution layer, separate position projections, no
relative attention) are refused by name: they would need other math.
"""

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import bert_json
from keras_bert_suite.families.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.families.module_tree import ENCODER_MODULES, HEAD_MODULES, ModuleTree

BLOCK = "deberta"
# transformers' defaults where a DeBERTa config leaves a key out (DebertaV2Config).
DEFAULTS = {"type_vocab_size": 0, "layer_norm_eps": 1e-7, "max_position_embeddings": 512,
            "position_buckets": -1, "max_relative_positions": -1, "pooler_hidden_act": "gelu"}
# The pooler activations transformers' ContextPooler takes that the encoder computes.
POOLER_ACTIVATIONS = {"gelu": "gelu", "tanh": "tanh", "relu": "relu"}


def _refuse(config_file, setting, value, why):
    raise UnsupportedCheckpointError(
        f"{config_file}: {setting} = {value!r} is a DeBERTa-v2 setting that DeBERTa-v3's block "
        f"does not have ({why}); only v3 configurations load.")


def _check_v3(hf_json, config_file):
    """Refuses the DeBERTa-v2 options that v3 does not use, naming the one found."""
    if not hf_json.get("relative_attention", False):
        _refuse(config_file, "relative_attention", hf_json.get("relative_attention", False),
                "v3 attends by relative position in every layer")
    if hf_json.get("conv_kernel_size", 0) > 0:
        _refuse(config_file, "conv_kernel_size", hf_json["conv_kernel_size"],
                "v2's convolution beside the first layer")
    if not hf_json.get("share_att_key", False):
        _refuse(config_file, "share_att_key", hf_json.get("share_att_key", False),
                "v3 projects relative embeddings with the tokens' own query and key weights")
    norms = [part.strip() for part in str(hf_json.get("norm_rel_ebd", "none")).lower().split("|")]
    if "layer_norm" not in norms:
        _refuse(config_file, "norm_rel_ebd", hf_json.get("norm_rel_ebd", "none"),
                "v3 normalizes the relative embeddings with a LayerNorm")
    if hf_json.get("position_biased_input", True):
        _refuse(config_file, "position_biased_input", hf_json.get("position_biased_input", True),
                "v3 adds no absolute position embeddings to the input")
    hidden = hf_json.get("hidden_size")
    for key in ("embedding_size", "pooler_hidden_size"):
        if hf_json.get(key, hidden) != hidden:
            _refuse(config_file, key, hf_json[key], f"v3's is the hidden size, {hidden}")
    heads = hf_json.get("num_attention_heads")
    head_size = hf_json.get("attention_head_size")
    if head_size is not None and heads and head_size * heads != hidden:
        _refuse(config_file, "attention_head_size", head_size, "v3's heads split the hidden size")


def _position_terms(hf_json):
    terms = hf_json.get("pos_att_type") or []
    if isinstance(terms, str):
        terms = terms.lower().split("|")
    return [term.strip() for term in terms]


def encoder_config(hf_json, config_file):
    """A DeBERTa-v3 config.json -> the encoder's arguments (block "deberta", its options)."""
    _check_v3(hf_json, config_file)
    hf_json = {**DEFAULTS, **hf_json}
    config = bert_encoder_config(hf_json, config_file)
    pooler = hf_json["pooler_hidden_act"]
    if pooler not in POOLER_ACTIVATIONS:
        raise UnsupportedCheckpointError(
            f"{config_file}: pooler_hidden_act {pooler!r} is not supported; the pooler computes "
            f"{', '.join(POOLER_ACTIVATIONS)}.")
    max_relative = hf_json["max_relative_positions"]
    config.update(
        pooler_activation=POOLER_ACTIVATIONS[pooler], block=BLOCK,
        block_options={
            "position_buckets": hf_json["position_buckets"],
            # transformers' -1: as far as the longest sequence
            "max_relative_positions": (max_relative if max_relative >= 1
                                       else hf_json["max_position_embeddings"]),
            "pos_att_type": _position_terms(hf_json)})
    return config


def hf_config(config):
    """The encoder's arguments -> DebertaV2Config keys (the inverse of `encoder_config`)."""
    options = config.get("block_options") or {}
    written = {key: value for key, value in bert_json(config).items()
               if key != "position_embedding_type"}
    return {**written, "relative_attention": True, "share_att_key": True,
            "norm_rel_ebd": "layer_norm", "position_biased_input": False,
            "position_buckets": options.get("position_buckets", 256),
            "max_relative_positions": options.get("max_relative_positions",
                                                  config["max_sequence_length"]),
            "pos_att_type": list(options.get("pos_att_type", ["p2c", "c2p"])),
            "pooler_hidden_size": config["hidden_dim"],
            "pooler_hidden_act": config.get("pooler_activation", "gelu"), "pooler_dropout": 0}


# BERT's encoder modules less the position rows and the pooler (transformers' ContextPooler
# sits in the task classes, `checkpoints/task_heads.py`); the relative embeddings and their
# LayerNorm; DebertaV2ForMaskedLM's legacy head, named as BERT's.
TREE = ModuleTree(
    {**{module: path for module, path in ENCODER_MODULES.items()
        if module not in ("embeddings/position_embedding", "pooler")},
     "relative_embeddings": "encoder.rel_embeddings",
     "relative_embeddings/layer_norm": "encoder.LayerNorm",
     **{module: path for module, path in HEAD_MODULES.items() if module.startswith("mlm/")},
     "mlm/output_bias": "cls.predictions.bias"},
    qkv=("query_proj", "key_proj", "value_proj"))


def _architecture(layers, hidden, heads):
    return {"vocabulary_size": 128100, "num_layers": layers, "num_heads": heads,
            "hidden_dim": hidden, "intermediate_dim": 4 * hidden, "max_sequence_length": 512,
            "num_segments": 0, "layer_norm_epsilon": 1e-7, "pooler_activation": "gelu",
            "block": BLOCK, "block_options": {"position_buckets": 256,
                                              "max_relative_positions": 512,
                                              "pos_att_type": ["p2c", "c2p"]}}


PRESETS = {
    "deberta_v3_xsmall": ("DeBERTa-v3 xsmall: 12 layers, hidden 384, SentencePiece vocabulary "
                          "of 128,100 (architecture only).", _architecture(12, 384, 6), False),
    "deberta_v3_small": ("DeBERTa-v3 small: 6 layers, hidden 768 (architecture only).",
                         _architecture(6, 768, 12), False),
    "deberta_v3_base": ("DeBERTa-v3 base: 12 layers, hidden 768 (architecture only).",
                        _architecture(12, 768, 12), False),
    "deberta_v3_large": ("DeBERTa-v3 large: 24 layers, hidden 1024 (architecture only).",
                         _architecture(24, 1024, 16), False),
}
# The released v3 checkpoints' masked-LM head is the original repository's, under names that
# DebertaV2ForMaskedLM does not read (it starts its own head at random).
RELEASED_HEAD = ("this DeBERTa-v3 checkpoint has no masked-LM head that transformers loads: "
                 "its `{}*` tensors are the original repository's head, which "
                 "DebertaV2ForMaskedLM ignores and initializes at random (transformers issues "
                 "#18143, #22790). A BertPretrainer from it starts its head at random too.")
FAMILY = Family(name="deberta", model_types=("deberta-v2",), prefix="deberta.", tree=TREE,
                encoder_config=encoder_config, base_model="DebertaV2Model", hf_config=hf_config,
                presets=PRESETS,
                unread_heads={prefix: RELEASED_HEAD.format(prefix)
                              for prefix in ("lm_predictions.", "mask_predictions.")})
