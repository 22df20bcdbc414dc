"""ALBERT (Lan et al. 2019): embeddings of width E projected to H, layers shared in groups
(layer i runs group int(i / (L / G)), a group being `inner_group_num` blocks), the tanh
approximation of GELU and its own module names."""

from keras_bert_suite.checkpoints.bert_config import bert_json
from keras_bert_suite.checkpoints.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.checkpoints.bert_layout import ModuleTree
from keras_bert_suite.families import Family


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
    },
    layer_path=_block_path,
    group_pattern=r"(?:^|\.)albert_layer_groups\.(\d+)\.")
def hf_config(config):
    return {**bert_json(config), "embedding_size": config["embedding_dim"],
            "num_hidden_groups": config["num_layer_groups"],
            "inner_group_num": config["layers_per_group"]}


FAMILY = Family(name="albert", model_types=("albert",), prefix="albert.", tree=TREE,
                encoder_config=encoder_config, base_model="AlbertModel", hf_config=hf_config)
