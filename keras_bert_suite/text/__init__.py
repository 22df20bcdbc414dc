"""Text processing in TensorFlow + tensorflow-text ops: runs in tf.data under every Keras
backend and inside exported SavedModels (ops that TF Serving >= 2.12 links)."""

from keras_bert_suite.text.packer import SegmentPacker
from keras_bert_suite.text.preprocessor import BertPreprocessor
from keras_bert_suite.text.byte_pair_tokenizer import BytePairTokenizer
from keras_bert_suite.text.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_bert_suite.text.tokenizer import BertTokenizer
from keras_bert_suite.text.vocabulary import learn_vocabulary

__all__ = [
    "BertPreprocessor", "BertTokenizer", "BytePairTokenizer", "SegmentPacker",
    "SentencePieceTokenizer", "learn_vocabulary",
]
