"""RoBERTa (Liu et al. 2019) and XLM-R (Conneau et al. 2019): BERT's module tree; positions
counted from the padding mask past the pad id, one segment row, LayerNorm epsilon 1e-5. The
classification head (dense -> tanh -> out_proj on <s>) is the pooler + a classifier."""

from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import bert_json
from keras_bert_suite.families.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.families.module_tree import ENCODER_MODULES, ModuleTree


def encoder_config(hf_json, config_file):
    config = bert_encoder_config(hf_json, config_file)
    # transformers numbers real tokens pad_id + 1, pad_id + 2, ... and padding pad_id: the
    # table holds max_position_embeddings = longest sequence + pad_id + 1 rows.
    offset = hf_json.get("pad_token_id", 1) + 1
    config.update(position_offset=offset,
                  max_sequence_length=hf_json.get("max_position_embeddings", 514) - offset,
                  num_segments=hf_json.get("type_vocab_size", 1),
                  layer_norm_epsilon=hf_json.get("layer_norm_eps", 1e-5))
    return config


# BERT's encoder modules; RobertaForMaskedLM's head is `lm_head` (decoder tied to the word
# embeddings), and RoBERTa has no sentence-pair head.
TREE = ModuleTree({**ENCODER_MODULES, "mlm/transform": "lm_head.dense",
                   "mlm/layer_norm": "lm_head.layer_norm", "mlm/output_bias": "lm_head.bias"})


def hf_config(config):
    offset = config["position_offset"]
    return {**bert_json(config), "pad_token_id": offset - 1, "bos_token_id": 0,
            "eos_token_id": 2, "max_position_embeddings": config["max_sequence_length"] + offset}


def _architecture(vocabulary_size, layers, hidden, heads):
    return {"vocabulary_size": vocabulary_size, "num_layers": layers, "num_heads": heads,
            "hidden_dim": hidden, "intermediate_dim": 4 * hidden, "max_sequence_length": 512,
            "num_segments": 1, "position_offset": 2, "layer_norm_epsilon": 1e-5}


PRESETS = {
    "roberta_base": ("RoBERTa-base: 12 layers, hidden 768, byte-level BPE vocabulary of "
                     "50,265 (architecture only).", _architecture(50265, 12, 768, 12), False),
    "roberta_large": ("RoBERTa-large: 24 layers, hidden 1024 (architecture only).",
                      _architecture(50265, 24, 1024, 16), False),
    "xlm_roberta_base": ("XLM-R base: 12 layers, hidden 768, SentencePiece vocabulary of "
                         "250,002 for 100 languages (architecture only).",
                         _architecture(250002, 12, 768, 12), False),
    "xlm_roberta_large": ("XLM-R large: 24 layers, hidden 1024 (architecture only).",
                          _architecture(250002, 24, 1024, 16), False),
}
FAMILY = Family(name="roberta", model_types=("roberta", "xlm-roberta"), prefix="roberta.",
                tree=TREE, encoder_config=encoder_config, base_model="RobertaModel",
                hf_config=hf_config, presets=PRESETS)
