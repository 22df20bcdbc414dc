"""RoBERTa (Liu et al. 2019) and XLM-R (Conneau et al. 2019): BERT's module tree; positions
counted from the padding mask past the pad id, one segment row, LayerNorm epsilon 1e-5. The
classification head (dense -> tanh -> out_proj on <s>) is the pooler + a classifier."""

from keras_bert_suite.checkpoints.bert_config import bert_json
from keras_bert_suite.checkpoints.bert_config import encoder_config as bert_encoder_config
from keras_bert_suite.checkpoints.bert_layout import BERT_TREE
from keras_bert_suite.families import Family


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


def hf_config(config):
    offset = config["position_offset"]
    return {**bert_json(config), "pad_token_id": offset - 1, "bos_token_id": 0,
            "eos_token_id": 2, "max_position_embeddings": config["max_sequence_length"] + offset}


FAMILY = Family(name="roberta", model_types=("roberta", "xlm-roberta"), prefix="roberta.",
                tree=BERT_TREE, encoder_config=encoder_config, base_model="RobertaModel",
                hf_config=hf_config)
