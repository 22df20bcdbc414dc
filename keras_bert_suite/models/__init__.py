"""The encoder (the backbone every task builds on) and building it from a checkpoint."""

from keras_bert_suite.models.encoder import BertEncoder
