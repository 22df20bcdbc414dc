"""BERT's encoder-level pieces in the serving graph (`EncoderPieces.serving`): the additive
attention bias every block takes, nothing after the last block, and the pooler on [CLS]."""

from keras_bert_suite.layers.serving import tf_ops
from keras_bert_suite.layers.serving.activations import POOLER
from keras_bert_suite.layers.serving.attention import attention_bias
from keras_bert_suite.layers.serving.dense import dense


class BertServingPieces:
    def __init__(self, config, read):
        self.read, self.hidden_dim, self.causal = read, config.hidden_dim, config.causal
        self.activation = POOLER[config.pooler_activation]

    def context(self, inputs, batch, length):
        return attention_bias(inputs["padding_mask"], self.causal)  # [B, 1, 1 or T, T]

    def finish(self, x):
        return x

    def pool(self, x, inputs, batch, length):
        first = tf_ops.reshape(x, [batch, length, self.hidden_dim])[:, 0]  # [B, H]
        return self.activation(dense(first, lambda name: self.read("pooler/" + name)))
