"""The config json beside a TF Model Garden TF2 encoder checkpoint (model_garden.py), as
BertEncoder arguments.

albert_config.json: Google's ALBERT keys, which Model Garden's tf2_albert_encoder_checkpoint_
converter (`--albert_config_file`) builds an AlbertEncoder from: embedding_size, and
num_hidden_groups and inner_group_num both 1 (its one block is shared by every layer). Its
"gelu" is Model Garden's (official.modeling.activations.gelu): the tanh approximation, which
ALBERT was trained with.
bert_config.json: read as for Google's BERT ("gelu" the exact GELU, "gelu_new" the tanh
approximation), plus `embedding_size` (Model Garden's BertEncoderConfig name) where it
differs from hidden_size: BertEncoder's `embedding_width` (ELECTRA's factorised embeddings).
Either encoder's pooler is a tanh dense (ELECTRA's GELU pooler is transformers', not theirs).
"""

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.families import albert
from keras_bert_suite.families.bert_config import encoder_config

ALBERT_CONFIG_FILE = "albert_config.json"


def bert_encoder_config(config_json, config_path):
    """bert_config.json; `embedding_size` != hidden_size: BertEncoder's `embedding_width`."""
    config = encoder_config(config_json, config_path)
    width = config_json.get("embedding_size")
    if width is not None and width != config["hidden_dim"]:
        config["embedding_dim"] = width
    return config


def albert_encoder_config(config_json, config_path):
    """albert_config.json as Model Garden's ALBERT converter builds AlbertEncoder from it."""
    groups = (config_json.get("num_hidden_groups", 1), config_json.get("inner_group_num", 1))
    if groups != (1, 1):
        raise UnsupportedCheckpointError(
            f"{config_path}: num_hidden_groups={groups[0]}, inner_group_num={groups[1]}; Model "
            f"Garden's AlbertEncoder has one transformer block shared by every layer (both 1, "
            f"as in every released ALBERT).")
    # Model Garden's "gelu" is the tanh approximation; albert.encoder_config reads HF names.
    hidden_act = config_json.get("hidden_act", "gelu")
    config = albert.encoder_config(
        {**config_json, "hidden_act": "gelu_new" if hidden_act == "gelu" else hidden_act},
        config_path)
    if config["embedding_dim"] == config["hidden_dim"]:  # AlbertEncoder has no projection then
        config["embedding_dim"] = None
    return config
