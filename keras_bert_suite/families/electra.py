"""ELECTRA (Clark et al. 2020): BERT's module tree with embeddings of width E projected to H
(`embeddings_project`) when E != H, and no pooler: its classification head (dense -> GELU ->
out_proj on [CLS]) is the pooler with a GELU + a classifier."""

from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import bert_json
from keras_bert_suite.families.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.families.module_tree import ENCODER_MODULES, ModuleTree


def encoder_config(hf_json, config_file):
    config = bert_encoder_config(hf_json, config_file)
    embedding_size = hf_json.get("embedding_size", config["hidden_dim"])
    config.update(
        embedding_dim=None if embedding_size == config["hidden_dim"] else embedding_size,
        pooler_activation="gelu")
    return config


# No pooler; ElectraForMaskedLM (the generator) has the masked-LM head, H -> E.
TREE = ModuleTree({**{module: path for module, path in ENCODER_MODULES.items()
                      if module != "pooler"},
                   "embeddings/projection": "embeddings_project",
                   "mlm/transform": "generator_predictions.dense",
                   "mlm/layer_norm": "generator_predictions.LayerNorm",
                   "mlm/output_bias": "generator_lm_head.bias",
                   # ElectraForPreTraining (the discriminator): ReplacedTokenDetector's head
                   "rtd/dense": "discriminator_predictions.dense",
                   "rtd/prediction": "discriminator_predictions.dense_prediction"})
def hf_config(config):
    return {**bert_json(config), "embedding_size": config["embedding_dim"] or config["hidden_dim"]}


def _architecture(embedding, layers, hidden, heads):
    return {"vocabulary_size": 30522, "num_layers": layers, "num_heads": heads,
            "hidden_dim": hidden, "intermediate_dim": 4 * hidden, "max_sequence_length": 512,
            "num_segments": 2, "embedding_dim": None if embedding == hidden else embedding,
            "pooler_activation": "gelu"}


# The released generators are as deep as their discriminators, 256 wide, and share the
# discriminator's embeddings (width E).
PRESETS = {
    "electra_small_discriminator": ("ELECTRA-small discriminator: 12 layers, hidden 256, "
                                    "embeddings 128 (architecture only).",
                                    _architecture(128, 12, 256, 4), True),
    "electra_small_generator": ("ELECTRA-small generator: 12 layers, hidden 256, embeddings "
                                "128 (architecture only).", _architecture(128, 12, 256, 4), True),
    "electra_base_discriminator": ("ELECTRA-base discriminator: 12 layers, hidden 768 "
                                   "(architecture only).", _architecture(768, 12, 768, 12), True),
    "electra_base_generator": ("ELECTRA-base generator: 12 layers, hidden 256, embeddings 768 "
                               "(architecture only).", _architecture(768, 12, 256, 4), True),
    "electra_large_discriminator": ("ELECTRA-large discriminator: 24 layers, hidden 1024 "
                                    "(architecture only).",
                                    _architecture(1024, 24, 1024, 16), True),
}
FAMILY = Family(name="electra", model_types=("electra",), prefix="electra.", tree=TREE,
                encoder_config=encoder_config, base_model="ElectraModel", hf_config=hf_config,
                presets=PRESETS)
