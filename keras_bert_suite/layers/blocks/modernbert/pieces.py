"""What ModernBERT adds around its blocks (`EncoderPieces`): embeddings without position rows
and with a bias-free LayerNorm; the context (the padding mask, the key mask, and the rotary
angles of each kind of attention, once per pass); the final norm after the last block; and the
pooler, transformers' `ModernBertPredictionHead` (dense without bias, activation, bias-free
LayerNorm) on [CLS] or on the mean of the real tokens."""

import keras
from keras import ops

from keras_bert_suite.layers import packed_rows
from keras_bert_suite.layers.blocks.modernbert.options import ATTENTION_KINDS, options_of
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.layers.rotary import inverse_frequencies, rotary_angles


def block_context(padding_mask, head_dim, thetas, ops=ops):
    """What every block takes ({name: tensor}): "padding_mask" [B, T], "keep" [B, 1, T, T]
    (the key mask, packed rows' instances included), "{kind}_cos" / "{kind}_sin" [B, T, Dh]
    the rotary angles of "global" and "local" layers (`thetas`: {kind: rotary base})."""
    positions = packed_rows.positions(padding_mask)  # [B, T], restarted in packed rows
    context = {"padding_mask": padding_mask, "keep": packed_rows.attention_mask(padding_mask)}
    for kind in ATTENTION_KINDS:
        frequencies = inverse_frequencies(head_dim, thetas[kind])
        context[f"{kind}_cos"], context[f"{kind}_sin"] = rotary_angles(positions, frequencies,
                                                                       ops)
    return context


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ModernBertContext(keras.layers.Layer):
    """`block_context` as a layer (no weights): computed once per pass in the encoder's
    graph, where the length is known only when it runs."""

    def __init__(self, head_dim, global_rope_theta, local_rope_theta, **kwargs):
        super().__init__(**kwargs)
        self.head_dim = head_dim
        self.global_rope_theta = global_rope_theta
        self.local_rope_theta = local_rope_theta

    def call(self, padding_mask):
        thetas = {"global": self.global_rope_theta, "local": self.local_rope_theta}
        return block_context(ops.cast(padding_mask, "int32"), self.head_dim, thetas)

    def get_config(self):
        config = super().get_config()
        config.update(head_dim=self.head_dim, global_rope_theta=self.global_rope_theta,
                      local_rope_theta=self.local_rope_theta)
        return config


def context(parts, inputs):
    return parts.shared["context"](inputs["padding_mask"])


def encoder_layers(config, policy):
    """The final norm (weights "final_norm/gamma") and the context layer (none)."""
    options = options_of(config)
    return {"final_norm": keras.layers.LayerNormalization(
                epsilon=config.layer_norm_epsilon, center=False, dtype=policy,
                name="final_norm"),
            "context": ModernBertContext(config.head_dim, options.global_rope_theta,
                                         options.local_rope_theta, name="block_context")}


def finish(parts, x):
    return parts.shared["final_norm"](x)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ModernBertPooler(keras.layers.Layer):
    """LN(act(x W)) on [B, H]: transformers' ModernBertPredictionHead (no biases)."""

    def __init__(self, hidden_dim, activation="gelu", layer_norm_epsilon=1e-5,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_dim, activation=activation, use_bias=False,
            kernel_initializer=BertInitializer(stddev=initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=False, dtype=self.dtype_policy, name="norm")

    def build(self, x_shape):
        self.dense.build(x_shape)
        self.norm.build(tuple(x_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, x):
        return self.norm(self.dense(x))

    def compute_output_shape(self, x_shape):
        return tuple(x_shape[:-1]) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_dim=self.hidden_dim, activation=self.activation,
                      layer_norm_epsilon=self.layer_norm_epsilon,
                      initializer_range=self.initializer_range)
        return config


def pooler(config, policy):
    return ModernBertPooler(config.hidden_dim, config.pooler_activation,
                            config.layer_norm_epsilon, config.initializer_range, dtype=policy,
                            name="pooler")


def pooled_rows(x, padding_mask, pooling, ops=ops):
    """[B, H]: [CLS]'s row ("cls") or the mean of the real tokens' rows ("mean")."""
    if pooling == "cls":
        return x[:, 0]
    real = ops.cast(ops.greater(padding_mask, 0), x.dtype)[:, :, None]  # [B, T, 1]
    return ops.sum(x * real, axis=1) / ops.sum(real, axis=1)


def pool(parts, x, inputs):
    pooling = options_of(parts.config).classifier_pooling
    return parts.pooler(pooled_rows(x, inputs["padding_mask"], pooling))
