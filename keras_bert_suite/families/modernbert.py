"""ModernBERT (Warner et al. 2024): the "modernbert" block kind (`layers/blocks/modernbert/`),
read from transformers' ModernBertModel and task classes (their encoder under `model.`).

config.json comes in two spellings, both read: transformers 5's `layer_types` ("full_attention"
/ "sliding_attention" per layer) and `rope_parameters` ({kind: {"rope_theta": ...}}), and the
released checkpoints' `global_attn_every_n_layers`, `global_rope_theta` and
`local_rope_theta`. The writer uses transformers 5's.
"""

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import (
    feed_forward_activation, hidden_act, require_keys)
from keras_bert_suite.families.module_tree import ModuleTree

# transformers' layer types -> our attention kinds, and their rope_parameters keys.
KINDS = {"full_attention": "global", "sliding_attention": "local"}
LAYER_TYPES = {kind: name for name, kind in KINDS.items()}
# The options transformers' config implies when a key is absent (ModernBertConfig's defaults).
DEFAULTS = {"local_attention": 128, "global_attn_every_n_layers": 3,
            "global_rope_theta": 160_000.0, "local_rope_theta": 10_000.0,
            "classifier_pooling": "cls"}
# Biases ModernBERT's released models do not have, and this block does not either.
NO_BIAS = ("norm_bias", "attention_bias", "mlp_bias", "classifier_bias")


def encoder_config(hf_json, config_file):
    require_keys(hf_json, ("vocab_size", "hidden_size", "num_hidden_layers",
                           "num_attention_heads", "intermediate_size"), "ModernBERT", config_file)
    for key in NO_BIAS:
        if hf_json.get(key):
            raise UnsupportedCheckpointError(
                f"{config_file}: {key} true is not supported; the modernbert block has no "
                f"biases (the released ModernBERT models have none).")
    pooler_activation = hf_json.get("classifier_activation", "gelu")
    if pooler_activation != "gelu":
        raise UnsupportedCheckpointError(
            f"{config_file}: classifier_activation {pooler_activation!r} is not supported "
            f"(the pooler computes the exact GELU, 'gelu').")
    layers = hf_json["num_hidden_layers"]
    return {
        "vocabulary_size": hf_json["vocab_size"],
        "num_layers": layers,
        "num_heads": hf_json["num_attention_heads"],
        "hidden_dim": hf_json["hidden_size"],
        "intermediate_dim": hf_json["intermediate_size"],
        # No position table (rotary positions); kept as the longest input it was made for.
        "max_sequence_length": hf_json.get("max_position_embeddings", 8192),
        "num_segments": 0,
        "dropout": max(hf_json.get(key, 0.0) for key in
                       ("embedding_dropout", "attention_dropout", "mlp_dropout")),
        "layer_norm_epsilon": hf_json.get("norm_eps", 1e-5),
        "initializer_range": hf_json.get("initializer_range", 0.02),
        "embedding_dim": None,
        "position_offset": 0,
        "activation": feed_forward_activation(hf_json.get("hidden_activation", "gelu"),
                                              config_file),
        "pooler_activation": pooler_activation,
        "num_layer_groups": None,
        "layers_per_group": 1,
        "block": "modernbert",
        "block_options": _block_options(hf_json, layers, config_file),
    }


def _block_options(hf_json, layers, config_file):
    """ModernBertOptions' fields from either spelling, only those that differ from the
    defaults (so equal configs read equal)."""
    options = {key: hf_json.get(key, default) for key, default in DEFAULTS.items()}
    rope = hf_json.get("rope_parameters") or {}
    for name, kind in KINDS.items():
        parameters = rope.get(name) or {}
        if parameters.get("rope_type", "default") != "default":
            raise UnsupportedCheckpointError(
                f"{config_file}: rope_type {parameters['rope_type']!r} ({name}) is not "
                f"supported; the block rotates by the default (unscaled) angles.")
        if "rope_theta" in parameters:
            options[f"{kind}_rope_theta"] = float(parameters["rope_theta"])
    layer_types = hf_json.get("layer_types")
    if layer_types is not None:
        if len(layer_types) != layers or any(name not in KINDS for name in layer_types):
            raise UnsupportedCheckpointError(
                f"{config_file}: layer_types must give each of the {layers} layers one of "
                f"{sorted(KINDS)}, got {layer_types!r}.")
        kinds = [KINDS[name] for name in layer_types]
        every = options["global_attn_every_n_layers"]
        if kinds != _pattern(every, layers):
            every = next((n for n in range(1, layers + 1) if kinds == _pattern(n, layers)), None)
        if every is None:
            options["layer_types"] = kinds
        else:
            options["global_attn_every_n_layers"] = every
    options = {key: value for key, value in options.items()
               if key == "layer_types" or value != DEFAULTS[key]}
    return options or None


def _pattern(every, layers):
    return ["local" if index % every else "global" for index in range(layers)]


def hf_config(config):
    """transformers 5's ModernBertConfig keys (`layer_types`, `rope_parameters`)."""
    options = {**DEFAULTS, **(config.get("block_options") or {})}
    layers = config["num_layers"]
    kinds = options.get("layer_types") or _pattern(options["global_attn_every_n_layers"], layers)
    return {
        "vocab_size": config["vocabulary_size"],
        "hidden_size": config["hidden_dim"],
        "num_hidden_layers": layers,
        "num_attention_heads": config["num_heads"],
        "intermediate_size": config["intermediate_dim"],
        "hidden_activation": hidden_act(config.get("activation", "gelu")),
        "max_position_embeddings": config["max_sequence_length"],
        "initializer_range": config["initializer_range"],
        "norm_eps": config["layer_norm_epsilon"],
        "norm_bias": False, "attention_bias": False, "mlp_bias": False,
        "classifier_bias": False,
        "embedding_dropout": config["dropout"], "attention_dropout": config["dropout"],
        "mlp_dropout": config["dropout"],
        "local_attention": options["local_attention"],
        "layer_types": [LAYER_TYPES[kind] for kind in kinds],
        "rope_parameters": {name: {"rope_type": "default",
                                   "rope_theta": options[f"{kind}_rope_theta"]}
                            for name, kind in KINDS.items()},
        "classifier_pooling": options["classifier_pooling"],
        "classifier_activation": config.get("pooler_activation", "gelu"),
    }


TREE = ModuleTree(
    {"embeddings/token_embedding": "embeddings.tok_embeddings",
     "embeddings/layer_norm": "embeddings.norm",
     "attention_norm": "attn_norm",
     "attention/qkv": "attn.Wqkv",  # one fused query | key | value module
     "attention/output": "attn.Wo",
     "feed_forward_norm": "mlp_norm",
     "feed_forward_input": "mlp.Wi",
     "feed_forward_output": "mlp.Wo",
     "final_norm": "final_norm",
     # ModernBertForMaskedLM: its prediction head (no biases), the decoder's bias (its
     # weight is tied to the token embeddings)
     "mlm/transform": "head.dense",
     "mlm/layer_norm": "head.norm",
     "mlm/output_bias": "decoder.bias"},
    layer_path=lambda index, config: f"layers.{index}",
    qkv=(),
    group_pattern=r"(?:^|\.)layers\.(\d+)\.")


def _architecture(layers, hidden, heads, intermediate, every):
    return {"vocabulary_size": 50368, "num_layers": layers, "num_heads": heads,
            "hidden_dim": hidden, "intermediate_dim": intermediate,
            "max_sequence_length": 8192, "num_segments": 0, "dropout": 0.0,
            "layer_norm_epsilon": 1e-5, "pooler_activation": "gelu", "block": "modernbert",
            "block_options": None if every == 3 else {"global_attn_every_n_layers": every}}


PRESETS = {
    "modernbert_base": ("ModernBERT-base: 22 layers, hidden 768, GeGLU 1152, global "
                        "attention every 3rd layer and 128-token windows elsewhere, byte-level "
                        "BPE vocabulary of 50,368 (architecture only).",
                        _architecture(22, 768, 12, 1152, 3), False),
    "modernbert_large": ("ModernBERT-large: 28 layers, hidden 1024, GeGLU 2624 (architecture "
                         "only).", _architecture(28, 1024, 16, 2624, 3), False),
}
FAMILY = Family(name="modernbert", model_types=("modernbert",), prefix="model.", tree=TREE,
                encoder_config=encoder_config, base_model="ModernBertModel",
                hf_config=hf_config, presets=PRESETS)
