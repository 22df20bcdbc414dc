"""The encoder's activation names in the serving graph: the formulas of `layers/gelu.py` over
TensorFlow ops."""

import functools

from keras_bert_suite.layers.gelu import FEED_FORWARD_FORMULAS, POOLER_FORMULAS
from keras_bert_suite.layers.serving import tf_ops

# TransformerBlock's `activation`, and the pooler's (BertEncoder's `pooler_activation`).
FEED_FORWARD = {name: functools.partial(formula, ops=tf_ops)
                for name, formula in FEED_FORWARD_FORMULAS.items()}
POOLER = {name: functools.partial(formula, ops=tf_ops)
          for name, formula in POOLER_FORMULAS.items()}
