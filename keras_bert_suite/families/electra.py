"""ELECTRA (Clark et al. 2020): BERT's module tree with embeddings of width E projected to H
(`embeddings_project`) when E != H, and no pooler: its classification head (dense -> GELU ->
out_proj on [CLS]) is the pooler with a GELU + a classifier."""

from keras_bert_suite.checkpoints.bert_config import bert_json
from keras_bert_suite.checkpoints.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.checkpoints.bert_layout import MODULES, ModuleTree
from keras_bert_suite.families import Family


def encoder_config(hf_json, config_file):
    config = bert_encoder_config(hf_json, config_file)
    embedding_size = hf_json.get("embedding_size", config["hidden_dim"])
    config.update(
        embedding_dim=None if embedding_size == config["hidden_dim"] else embedding_size,
        pooler_activation="gelu")
    return config


TREE = ModuleTree({**{module: path for module, path in MODULES.items() if module != "pooler"},
                   "embeddings/projection": "embeddings_project"})
def hf_config(config):
    return {**bert_json(config), "embedding_size": config["embedding_dim"] or config["hidden_dim"]}


FAMILY = Family(name="electra", model_types=("electra",), prefix="electra.", tree=TREE,
                encoder_config=encoder_config, base_model="ElectraModel", hf_config=hf_config)
