"""The serving form of BERT's block: `math.block` over TensorFlow forms of its sublayers, on
2-D activations [B T, H] in the export's precision (no dropout)."""

from keras_bert_suite.layers.blocks.bert import math
from keras_bert_suite.layers.serving.activations import FEED_FORWARD
from keras_bert_suite.layers.serving.attention import self_attention
from keras_bert_suite.layers.serving.dense import dense, layer_norm


def transformer_block(x, read, num_heads, head_dim, activation, epsilon, bias, batch, length,
                      observe=None):
    """x [B T, H] -> [B T, H]. `read`: the block's weights ("attention/qkv/kernel", ...,
    "output_layer_norm/beta"); `observe(kernel name, x)` sees every matmul's input (int8_vnni
    calibration)."""
    return math.block(x, ServingParts(read, num_heads, head_dim, activation, epsilon, bias,
                                      batch, length, observe))


class ServingParts:
    """The block's sublayers as `math.block` calls them, in TensorFlow ops. `context`: what
    the attention takes (BERT's: the attention bias); a kind with BERT's block around other
    attention (DeBERTa's) overrides `attention` alone."""

    def __init__(self, read, num_heads, head_dim, activation, epsilon, context, batch, length,
                 observe):
        self.read, self.epsilon, self.context = read, epsilon, context
        self.heads = (num_heads, head_dim)
        self.shape = (batch, length)
        self.activation = FEED_FORWARD[activation]
        self.observe = observe or (lambda name, x: None)

    def attention(self, x, queries):
        self.observe("attention/qkv/kernel", x)
        return self_attention(x, lambda name: self.read("attention/" + name), *self.heads,
                              self.context, *self.shape)

    def dense(self, module, x):
        self.observe(module + "/kernel", x)
        return dense(x, self.read, module + "/")

    def norm(self, module, x):
        return layer_norm(x, self.read, module, self.epsilon)

    def dropout(self, name, x):
        return x


def form(config, read, index):
    """Block `index`'s serving form for an encoder of `config` (an EncoderConfig): its heads
    from the [H, 3, N, Dh] qkv kernel (`read` gives the float weights: pruned blocks differ)."""
    num_heads, head_dim = tuple(read("attention/qkv/kernel").shape[2:])
    activation, epsilon = config.activation, float(config.layer_norm_epsilon)

    def block(x, read, bias, batch, length, observe=None):
        return transformer_block(x, read, num_heads, head_dim, activation, epsilon, bias,
                                 batch, length, observe)

    return block
