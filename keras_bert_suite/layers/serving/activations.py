"""The encoder's activation names in TensorFlow ops, from the same formulas as the Keras
layers' (`layers/gelu.py`)."""

import tensorflow as tf

from keras_bert_suite.layers.gelu import erf_gelu, tanh_gelu


def _exact_gelu(x):
    return erf_gelu(x, tf.math.erf)


def _approximate_gelu(x):
    return tanh_gelu(x, tf.tanh)


# TransformerBlock's `activation`, and the pooler's (BertEncoder's `pooler_activation`; Keras'
# "gelu" is the exact one).
FEED_FORWARD = {"gelu": _exact_gelu, "gelu_approximate": _approximate_gelu}
POOLER = {"tanh": tf.tanh, "gelu": _exact_gelu, "relu": tf.nn.relu}
