"""ModernBERT's serving forms: its block (`modernbert_block.block`) and what it adds around the
blocks (`pieces.py`), the same math over TensorFlow ops on 2-D activations [B T, H] in the
export's precision. Local layers attend with `windowed_attention` (cost linear in T) in the
graph, whose length is unknown, global ones a block of query rows at a time on long inputs
(`query_blocked_attention`: memory linear in T); one instance per row."""

from keras_bert_suite.layers import modernbert_block
from keras_bert_suite.layers.blocks.modernbert.options import options_of
from keras_bert_suite.layers.blocks.modernbert.pieces import pooled_rows
from keras_bert_suite.layers.layer_norm import layer_norm
from keras_bert_suite.layers.rotary import inverse_frequencies, rotary_angles
from keras_bert_suite.layers.serving import tf_ops
from keras_bert_suite.layers.serving.activations import FEED_FORWARD, POOLER
from keras_bert_suite.layers.serving.dense import dense
from keras_bert_suite.layers.serving.int8_matmul import Int8Kernel
from keras_bert_suite.layers.query_chunks import query_blocked_attention
from keras_bert_suite.layers.sliding_window import windowed_attention


class _ServingParts:
    """The block's sublayers as `modernbert_block.block` calls them, in TensorFlow ops."""

    def __init__(self, read, context, num_heads, kind, radius, activation, epsilon, batch,
                 length, observe):
        self.read, self.context, self.num_heads = read, context, num_heads
        self.kind, self.radius, self.epsilon = kind, radius, epsilon
        self.activation = FEED_FORWARD[activation]
        self.shape = (batch, length)
        self.observe = observe or (lambda name, x: None)

    def attention(self, x):
        self.observe("attention/qkv/kernel", x)

        def flat(name):  # the [H, 3 N Dh] kernel of the one qkv matmul
            value = self.read(name)
            return value if isinstance(value, Int8Kernel) else tf_ops.reshape(
                value, [value.shape[0], -1])
        qkv = dense(x, flat, "attention/qkv/", bias=False)  # [B T, 3 N Dh]
        width = qkv.shape[-1]
        qkv = tf_ops.reshape(qkv, [*self.shape, width])
        context = self.context
        cos, sin = context[f"{self.kind}_cos"], context[f"{self.kind}_sin"]
        if self.kind == "local":
            def attend(query, key, value):
                return windowed_attention(query, key, value, context["padding_mask"],
                                          self.radius, tf_ops)
        else:
            def attend(query, key, value):  # a block of query rows at a time on long inputs
                return query_blocked_attention(query, key, value, context["keep"],
                                               ops=tf_ops)
        heads = modernbert_block.rotary_attention(qkv, cos, sin, attend, self.num_heads, tf_ops)
        heads = tf_ops.reshape(heads, [-1, width // 3])  # [B T, N Dh]
        self.observe("attention/output/kernel", heads)
        return dense(heads, self.read, "attention/output/", bias=False)

    def dense(self, module, x):
        self.observe(module + "/kernel", x)
        return dense(x, self.read, module + "/", bias=False)

    def norm(self, module, x):
        return layer_norm(x, self.read(module + "/gamma"), None, self.epsilon, tf_ops)

    def dropout(self, name, x):
        return x


def form(config, read, index):
    """Block `index`'s serving form for an encoder of `config`: global or local, with or
    without its attention norm (block 0), its heads from its qkv kernel (`read` gives the
    float weights: pruned blocks differ)."""
    options = options_of(config)
    num_heads = int(read("attention/qkv/kernel").shape[2])
    kind, radius = options.attention_kind(index), options.radius
    activation, epsilon = config.activation, float(config.layer_norm_epsilon)

    def block(x, read, context, batch, length, observe=None):
        parts = _ServingParts(read, context, num_heads, kind, radius, activation, epsilon,
                              batch, length, observe)
        return modernbert_block.block(x, parts, index, tf_ops)

    return block


class ServingPieces:
    """What ModernBERT adds around its blocks (`pieces.py`) in TensorFlow ops."""

    def __init__(self, config, read):
        self.read, self.hidden_dim = read, config.hidden_dim
        self.epsilon = float(config.layer_norm_epsilon)
        self.options, self.head_dim = options_of(config), config.head_dim
        self.activation = POOLER[config.pooler_activation]

    def context(self, inputs, batch, length):
        """As `pieces.block_context`, for rows of one instance each: positions 0 .. T-1."""
        padding_mask = inputs["padding_mask"]
        context = {"padding_mask": padding_mask,
                   "keep": tf_ops.cast(padding_mask, "bool")[:, None, None, :]}  # [B, 1, 1, T]
        positions = tf_ops.arange(length)
        for kind in ("global", "local"):
            frequencies = inverse_frequencies(self.head_dim, self.options.rope_theta(kind))
            context[f"{kind}_cos"], context[f"{kind}_sin"] = rotary_angles(
                positions, frequencies, tf_ops)  # [T, Dh]
        return context

    def finish(self, x):
        return layer_norm(x, self.read("final_norm/gamma"), None, self.epsilon, tf_ops)

    def pool(self, x, inputs, batch, length):
        rows = pooled_rows(tf_ops.reshape(x, [batch, length, self.hidden_dim]),
                           inputs["padding_mask"], self.options.classifier_pooling, tf_ops)
        x = self.activation(dense(rows, self.read, "pooler/dense/", bias=False))
        return layer_norm(x, self.read("pooler/norm/gamma"), None, self.epsilon, tf_ops)
