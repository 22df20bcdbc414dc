"""BERT (Devlin et al. 2018): the family's reference; every other family is a variation."""

from keras_bert_suite.families import Family
from keras_bert_suite.families.bert_config import bert_json, encoder_config
from keras_bert_suite.families.module_tree import BERT_TREE

FAMILY = Family(name="bert", model_types=("bert",), prefix="bert.", tree=BERT_TREE,
                encoder_config=encoder_config, base_model="BertModel", hf_config=bert_json)
