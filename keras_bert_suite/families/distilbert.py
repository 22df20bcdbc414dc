"""DistilBERT (Sanh et al. 2019): no segment embeddings, no pooler (its classification head,
pre_classifier -> ReLU -> classifier, is the pooler with a ReLU + a classifier), and its own
module names."""

from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import (
    BERT_FAMILY_DEFAULTS, feed_forward_activation, hidden_act, require_keys)
from keras_bert_suite.families.module_tree import ModuleTree


def encoder_config(hf_json, config_file):
    require_keys(hf_json, ("vocab_size", "dim", "n_layers", "n_heads", "hidden_dim"),
                 "DistilBERT", config_file)
    return {
        "vocabulary_size": hf_json["vocab_size"],
        "num_layers": hf_json["n_layers"],
        "num_heads": hf_json["n_heads"],
        "hidden_dim": hf_json["dim"],
        "intermediate_dim": hf_json["hidden_dim"],
        "max_sequence_length": hf_json.get("max_position_embeddings", 512),
        "num_segments": 0,
        "dropout": hf_json.get("dropout", 0.1),
        "layer_norm_epsilon": 1e-12,  # transformers' DistilBERT hard-wires it
        "initializer_range": hf_json.get("initializer_range", 0.02),
        **BERT_FAMILY_DEFAULTS,
        "activation": feed_forward_activation(hf_json.get("activation", "gelu"), config_file),
        "pooler_activation": "relu",
    }


TREE = ModuleTree(
    {
        "embeddings/token_embedding": "embeddings.word_embeddings",
        "embeddings/position_embedding": "embeddings.position_embeddings",
        "embeddings/layer_norm": "embeddings.LayerNorm",
        "attention/qkv": "attention",  # three modules: .q_lin, .k_lin, .v_lin
        "attention/output": "attention.out_lin",
        "attention_layer_norm": "sa_layer_norm",
        "intermediate": "ffn.lin1",
        "output": "ffn.lin2",
        "output_layer_norm": "output_layer_norm",
        "mlm/transform": "vocab_transform",  # DistilBertForMaskedLM's head
        "mlm/layer_norm": "vocab_layer_norm",
        "mlm/output_bias": "vocab_projector.bias",
    },
    layer_path=lambda index, config: f"transformer.layer.{index}",
    qkv=("q_lin", "k_lin", "v_lin"),
    group_pattern=r"(?:^|\.)transformer\.layer\.(\d+)\.")
def hf_config(config):
    return {"vocab_size": config["vocabulary_size"], "dim": config["hidden_dim"],
            "n_layers": config["num_layers"], "n_heads": config["num_heads"],
            "hidden_dim": config["intermediate_dim"],
            "activation": hidden_act(config["activation"]), "dropout": config["dropout"],
            "attention_dropout": config["dropout"],
            "max_position_embeddings": config["max_sequence_length"],
            "initializer_range": config["initializer_range"], "sinusoidal_pos_embds": False,
            "pad_token_id": 0}


def _architecture(vocabulary_size):
    return {"vocabulary_size": vocabulary_size, "num_layers": 6, "num_heads": 12,
            "hidden_dim": 768, "intermediate_dim": 3072, "max_sequence_length": 512,
            "num_segments": 0, "pooler_activation": "relu"}


PRESETS = {
    "distilbert_base_uncased": ("DistilBERT base uncased: 6 layers, hidden 768, no segment "
                                "embeddings (architecture only).", _architecture(30522), True),
    "distilbert_base_cased": ("DistilBERT base cased (architecture only).",
                              _architecture(28996), False),
    "distilbert_base_multilingual_cased": ("DistilBERT base multilingual cased, 104 languages "
                                           "(architecture only).", _architecture(119547), False),
}
FAMILY = Family(name="distilbert", model_types=("distilbert",), prefix="distilbert.",
                tree=TREE, encoder_config=encoder_config, base_model="DistilBertModel",
                hf_config=hf_config, presets=PRESETS)
