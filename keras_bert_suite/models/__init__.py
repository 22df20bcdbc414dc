from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.models.presets import list_presets
from keras_bert_suite.models.pretrainer import BertPretrainer
