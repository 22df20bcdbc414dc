"""ALBERT (Lan et al. 2019): embeddings of width E projected to H, layers shared in groups
(layer i runs group int(i / (L / G)), a group being `inner_group_num` blocks), the tanh
approximation of GELU and its own module names."""

from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import bert_json
from keras_bert_suite.families.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.families.module_tree import ModuleTree


def encoder_config(hf_json, config_file):
    config = bert_encoder_config(hf_json, config_file)
    config.update(embedding_dim=hf_json.get("embedding_size", 128),
                  num_layer_groups=hf_json.get("num_hidden_groups", 1),
                  layers_per_group=hf_json.get("inner_group_num", 1))
    return config


def _block_path(index, config):
    group, inner = divmod(index, config["layers_per_group"])
    return f"encoder.albert_layer_groups.{group}.albert_layers.{inner}"


TREE = ModuleTree(
    {
        "embeddings/token_embedding": "embeddings.word_embeddings",
        "embeddings/segment_embedding": "embeddings.token_type_embeddings",
        "embeddings/position_embedding": "embeddings.position_embeddings",
        "embeddings/layer_norm": "embeddings.LayerNorm",
        "embeddings/projection": "encoder.embedding_hidden_mapping_in",
        "attention/qkv": "attention",  # three modules: .query, .key, .value
        "attention/output": "attention.dense",
        "attention_layer_norm": "attention.LayerNorm",
        "intermediate": "ffn",
        "output": "ffn_output",
        "output_layer_norm": "full_layer_layer_norm",
        "pooler": "pooler",
        "mlm/transform": "predictions.dense",  # AlbertForPreTraining's heads: H -> E
        "mlm/layer_norm": "predictions.LayerNorm",
        "mlm/output_bias": "predictions.bias",
        "nsp": "sop_classifier.classifier",  # sentence order on the pooled output
    },
    layer_path=_block_path,
    group_pattern=r"(?:^|\.)albert_layer_groups\.(\d+)\.")
def hf_config(config):
    return {**bert_json(config), "embedding_size": config["embedding_dim"],
            "num_hidden_groups": config["num_layer_groups"],
            "inner_group_num": config["layers_per_group"]}


def _architecture(layers, hidden, heads):
    return {"vocabulary_size": 30000, "num_layers": layers, "num_heads": heads,
            "hidden_dim": hidden, "intermediate_dim": 4 * hidden, "max_sequence_length": 512,
            "num_segments": 2, "embedding_dim": 128, "activation": "gelu_approximate",
            "num_layer_groups": 1, "layers_per_group": 1,
            "dropout": 0.0}  # the v2 models were trained without dropout


PRESETS = {
    "albert_base_v2": ("ALBERT-base v2: 12 layers sharing one block, hidden 768, embeddings "
                       "128 (architecture only).", _architecture(12, 768, 12), True),
    "albert_large_v2": ("ALBERT-large v2: 24 layers sharing one block, hidden 1024 "
                        "(architecture only).", _architecture(24, 1024, 16), True),
    "albert_xlarge_v2": ("ALBERT-xlarge v2: 24 layers sharing one block, hidden 2048 "
                         "(architecture only).", _architecture(24, 2048, 16), True),
    "albert_xxlarge_v2": ("ALBERT-xxlarge v2: 12 layers sharing one block, hidden 4096 "
                          "(architecture only).", _architecture(12, 4096, 64), True),
}
FAMILY = Family(name="albert", model_types=("albert",), prefix="albert.", tree=TREE,
                encoder_config=encoder_config, base_model="AlbertModel", hf_config=hf_config,
                presets=PRESETS)
