"""keras_bert_suite: BERT as a Keras 3 library for TensorFlow, JAX and PyTorch.

Public classes follow DESIGN.md: an encoder (`BertEncoder`), a tokenizer and a preprocessor
that turn text into the encoder's inputs, and task models that add a head to the encoder.
"""

__version__ = "0.1.0"

from keras_bert_suite.models import BertEncoder, BertPretrainer, list_presets  # noqa: E402
from keras_bert_suite.models import (  # noqa: E402
    BertClassifier, BertFeatureExtractor, BertMultipleChoice, BertSpanLabeler,
    BertTokenClassifier)
from keras_bert_suite.text import (  # noqa: E402
    BertPreprocessor, BertTokenizer, SegmentPacker, learn_vocabulary)
