"""The serving form of DeBERTa's block: BERT's block math (`bert/math.py`) over TensorFlow forms
of its sublayers, disentangled attention (`layers/disentangled_attention.py`) over TensorFlow
ops, on 2-D activations [B T, H] in the export's precision (no dropout)."""

from keras_bert_suite.layers.blocks.bert import math
from keras_bert_suite.layers.blocks.bert.serving import ServingParts
from keras_bert_suite.layers.blocks.deberta.options import options_of
from keras_bert_suite.layers.disentangled_attention import disentangled_attention
from keras_bert_suite.layers.serving import tf_ops
from keras_bert_suite.layers.serving.dense import dense
from keras_bert_suite.layers.serving.int8_matmul import Int8Kernel


def disentangled_self_attention(x, read, num_heads, head_dim, terms, context, batch, length):
    """x [B T, H] -> [B T, H]: the fused q|k|v matmul on the tokens and on the relative
    embeddings (v3 shares the projections), the disentangled scores, the output projection.
    `context`: {"keep" [B, 1, 1 or T, T] bool, "relative" [2 S, H], "indices" [T, T]}."""
    def flat(name):  # the [H, 3 N Dh] kernel and [3 N Dh] bias of the one qkv matmul
        value = read(name)
        if isinstance(value, Int8Kernel):  # stored 2-D
            return value
        return tf_ops.reshape(value, [value.shape[0], -1] if name.endswith("kernel") else [-1])
    qkv = tf_ops.reshape(dense(x, flat, "qkv/"), [batch, length, 3, num_heads, head_dim])
    query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, T, N, Dh]
    positions = tf_ops.reshape(dense(context["relative"], flat, "qkv/"),
                               [-1, 3, num_heads, head_dim])  # [2 S, 3, N, Dh]
    position_query = positions[:, 0] if "p2c" in terms else None
    position_key = positions[:, 1] if "c2p" in terms else None
    attended = disentangled_attention(query, key, value, position_query, position_key,
                                      context["indices"], context["keep"], tf_ops)
    return dense(tf_ops.reshape(attended, [-1, num_heads * head_dim]), read, "output/")


class _ServingParts(ServingParts):
    """BERT's block parts in TensorFlow ops with disentangled attention."""

    def __init__(self, read, heads, terms, activation, epsilon, context, batch, length,
                 observe):
        super().__init__(read, *heads, activation, epsilon, context, batch, length, observe)
        self.terms = terms

    def attention(self, x, queries):
        self.observe("attention/qkv/kernel", x)
        return disentangled_self_attention(x, lambda name: self.read("attention/" + name),
                                           *self.heads, self.terms, self.context, *self.shape)


def form(config, read, index=None):
    """The block's serving form for an encoder of `config` (an EncoderConfig): its heads from
    the [H, 3, N, Dh] qkv kernel (`read` gives the float weights: pruned blocks differ)."""
    heads = tuple(read("attention/qkv/kernel").shape[2:])
    terms = options_of(config).pos_att_type
    activation, epsilon = config.activation, float(config.layer_norm_epsilon)

    def block(x, read, context, batch, length, observe=None):
        return math.block(x, _ServingParts(read, heads, terms, activation, epsilon, context,
                                           batch, length, observe))

    return block
