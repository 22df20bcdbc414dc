"""ModernBERT's math (layers/rotary, geglu, layer_norm, sliding_window, modernbert_block)
against transformers' ModernBertModel: a tiny model with random weights (norms too), a sliding
window shorter than the sequence (radius 3 in 20 tokens) so local and global layers both matter,
and a padded row; a test-local forward chains the functions to its `last_hidden_state`."""

import numpy as np
import pytest
from keras import ops

from keras_bert_suite.layers.gelu import exact_gelu
from keras_bert_suite.layers.geglu import geglu
from keras_bert_suite.layers.layer_norm import layer_norm
from keras_bert_suite.layers.modernbert_block import (
    ROPE_THETA, attention_kind, block, rotary_attention)
from keras_bert_suite.layers.rotary import inverse_frequencies, rotary_angles, rotate
from keras_bert_suite.layers.sliding_window import (
    local_keep, masked_attention, windowed_attention)
from tests.conftest import to_numpy
from tests.layers.torch_reference import (
    RTOL, atol_for, numpy_weights, padded_batch, randomized, run)

CONFIG = dict(vocab_size=97, hidden_size=32, num_attention_heads=4, intermediate_size=48,
              num_hidden_layers=4, local_attention=6, max_position_embeddings=64,
              pad_token_id=0, hidden_activation="gelu")
HEADS, HEAD_DIM, RADIUS, EPSILON = 4, 8, 3, 1e-5
# Our module names (modernbert_block's `parts`) -> transformers' in layer i.
TORCH_NAMES = {"attention/qkv": "attn.Wqkv", "attention/output": "attn.Wo",
               "attention_norm": "attn_norm", "feed_forward_norm": "mlp_norm",
               "feed_forward_input": "mlp.Wi", "feed_forward_output": "mlp.Wo"}


@pytest.fixture(scope="module")
def reference():
    """(model, its weights, token ids [2, 20], padding mask [2, 20]: the second row 13 tokens)."""
    from transformers import ModernBertConfig, ModernBertModel

    config = ModernBertConfig(**CONFIG)
    config._attn_implementation = "eager"
    model = randomized(lambda: ModernBertModel(config))
    return (model, numpy_weights(model)) + padded_batch(CONFIG["vocab_size"])


class _Parts:
    """modernbert_block's `parts` over transformers' weights of layer `index`."""

    def __init__(self, weights, index, cos, sin, attend, ops, activation):
        self.weights, self.index, self.ops, self.activation = weights, index, ops, activation
        self.cos, self.sin, self.attend = cos, sin, attend

    def _weight(self, module):
        return self.weights[f"layers.{self.index}.{TORCH_NAMES[module]}.weight"]

    def dense(self, module, x):
        return self.ops.matmul(x, self._weight(module).T)  # torch keeps [out, in]

    def norm(self, module, x):
        return layer_norm(x, self._weight(module), None, EPSILON, self.ops)

    def attention(self, x):
        qkv = self.dense("attention/qkv", x)
        context = rotary_attention(qkv, self.cos, self.sin, self.attend, HEADS, self.ops)
        return self.dense("attention/output", context)

    def dropout(self, name, x):
        return x


def _layer_parts(weights, index, padding_mask, form, ops, activation):
    """Layer `index`'s parts: its rotary angles and its attention (masked or windowed)."""
    kind = attention_kind(index)
    positions = ops.arange(ops.shape(padding_mask)[1])
    cos, sin = rotary_angles(positions, inverse_frequencies(HEAD_DIM, ROPE_THETA[kind]), ops)
    if kind == "global":
        keep = ops.cast(padding_mask, "bool")[:, None, None, :]
        attend = lambda q, k, v: masked_attention(q, k, v, keep, ops)  # noqa: E731
    elif form == "windowed":
        def attend(query, key, value):
            return windowed_attention(query, key, value, padding_mask, RADIUS, ops)
    else:
        keep = local_keep(padding_mask, RADIUS, ops)
        attend = lambda q, k, v: masked_attention(q, k, v, keep, ops)  # noqa: E731
    return _Parts(weights, index, cos, sin, attend, ops, activation)


def _encode(weights, token_ids, padding_mask, form="masked", ops=ops, activation=exact_gelu):
    """ModernBertModel's forward from the functions: embeddings, blocks, final norm."""
    x = ops.take(weights["embeddings.tok_embeddings.weight"], token_ids, axis=0)
    x = layer_norm(x, weights["embeddings.norm.weight"], None, EPSILON, ops)
    for index in range(CONFIG["num_hidden_layers"]):
        parts = _layer_parts(weights, index, padding_mask, form, ops, activation)
        x = block(x, parts, index, ops)
    return layer_norm(x, weights["final_norm.weight"], None, EPSILON, ops)


def _expected(model, token_ids, padding_mask):
    return run(model, token_ids, attention_mask=padding_mask).last_hidden_state.numpy()


def test_schedule_thetas_and_radius_are_transformers_defaults():
    from transformers import ModernBertConfig

    config = ModernBertConfig(num_hidden_layers=7)
    kinds = {"full_attention": "global", "sliding_attention": "local"}
    assert [kinds[kind] for kind in config.layer_types] == [attention_kind(i) for i in range(7)]
    for kind, ours in kinds.items():
        assert config.rope_parameters[kind]["rope_theta"] == ROPE_THETA[ours]
    assert config.sliding_window == config.local_attention // 2 == 64


@pytest.mark.parametrize("kind", ["full_attention", "sliding_attention"])
def test_rotary_angles_and_rotation_match(reference, kind):
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    model = reference[0]
    positions = np.array([[0, 1, 2, 3, 4, 5], [0, 1, 2, 0, 1, 2]])  # the second row: packed
    x = np.random.default_rng(1).normal(size=(2, 6, HEADS, HEAD_DIM)).astype("float32")
    cos, sin = run(model.rotary_emb, x, positions, kind)
    theta = ROPE_THETA["global" if kind == "full_attention" else "local"]
    our_cos, our_sin = rotary_angles(positions, inverse_frequencies(HEAD_DIM, theta))
    np.testing.assert_allclose(to_numpy(our_cos), cos.numpy(), rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(to_numpy(our_sin), sin.numpy(), rtol=RTOL, atol=1e-6)
    rotated, _ = run(apply_rotary_pos_emb, x.transpose(0, 2, 1, 3), x.transpose(0, 2, 1, 3),
                     cos, sin)  # transformers' heads come before positions
    expected = rotated.numpy().transpose(0, 2, 1, 3)
    np.testing.assert_allclose(to_numpy(rotate(x, our_cos, our_sin)), expected, rtol=RTOL,
                               atol=atol_for(expected))


def test_geglu_feed_forward_and_bias_free_norm_match(reference):
    model, weights = reference[:2]
    x = np.random.default_rng(2).normal(size=(2, 5, CONFIG["hidden_size"])).astype("float32")
    expected = run(model.layers[1].mlp, x).numpy()
    hidden = geglu(ops.matmul(x, weights["layers.1.mlp.Wi.weight"].T), exact_gelu)
    ours = ops.matmul(hidden, weights["layers.1.mlp.Wo.weight"].T)
    np.testing.assert_allclose(to_numpy(ours), expected, rtol=RTOL, atol=atol_for(expected))
    expected = run(model.layers[1].mlp_norm, x).numpy()
    ours = layer_norm(x, weights["layers.1.mlp_norm.weight"], None, EPSILON)
    np.testing.assert_allclose(to_numpy(ours), expected, rtol=RTOL, atol=atol_for(expected))


def _layer_inputs_outputs(model, token_ids, padding_mask):
    """[(input, output)] of every transformers layer in one forward pass, as numpy."""
    seen = []
    hooks = [layer.register_forward_hook(
        lambda module, args, output: seen.append((args[0].numpy(), output.numpy())))
        for layer in model.layers]
    try:
        run(model, token_ids, attention_mask=padding_mask)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


@pytest.mark.parametrize("form", ["masked", "windowed"])
def test_every_block_matches_its_transformers_layer(reference, form):
    """Block i fed transformers' input to layer i gives its output: layer 0 (global, no
    attention norm), 1 and 2 (local), 3 (global)."""
    model, weights, token_ids, padding_mask = reference
    real = padding_mask.astype(bool)
    layers = _layer_inputs_outputs(model, token_ids, padding_mask)
    for index, (layer_input, expected) in enumerate(layers):
        parts = _layer_parts(weights, index, padding_mask, form, ops, exact_gelu)
        ours = to_numpy(block(ops.convert_to_tensor(layer_input), parts, index))
        np.testing.assert_allclose(ours[real], expected[real], rtol=RTOL,
                                   atol=atol_for(expected), err_msg=f"layer {index}")


@pytest.mark.parametrize("form", ["masked", "windowed"])
def test_the_chained_functions_give_last_hidden_state(reference, form):
    model, weights, token_ids, padding_mask = reference
    expected = _expected(model, token_ids, padding_mask)
    ours = to_numpy(_encode(weights, token_ids, padding_mask, form))
    real = padding_mask.astype(bool)  # padded rows are nobody's keys: their values are free
    np.testing.assert_allclose(ours[real], expected[real], rtol=RTOL, atol=atol_for(expected))


def test_windowed_attention_equals_the_band_masked_form():
    """13 tokens (the last 6 of one row padding): radius 0, a radius whose blocks do not divide
    the length, a radius beyond it. (JAX compiles each new shape: one length keeps it short.)"""
    rng = np.random.default_rng(3)
    for length, radius in [(13, 0), (13, 4), (13, 64)]:
        query, key, value = (rng.normal(size=(2, length, 2, 4)).astype("float32")
                             for _ in range(3))
        padding_mask = np.ones((2, length), "int32")
        padding_mask[1, length // 2 + 1:] = 0
        expected = to_numpy(masked_attention(query, key, value,
                                             local_keep(padding_mask, radius)))
        ours = to_numpy(windowed_attention(query, key, value, padding_mask, radius))
        real = padding_mask.astype(bool)
        np.testing.assert_allclose(ours[real], expected[real], rtol=1e-5, atol=1e-6,
                                   err_msg=f"length {length}, radius {radius}")


@pytest.mark.needs_tf_graph
@pytest.mark.parametrize("form", ["masked", "windowed"])
def test_the_tensorflow_form_in_a_graph_of_unknown_shape(reference, form):
    """The same functions over TensorFlow ops, traced once for any batch and length (a serving
    graph), give transformers' numbers."""
    import tensorflow as tf

    from tests.layers.tf_namespace import TF_OPS

    model, weights, token_ids, padding_mask = reference
    spec = tf.TensorSpec([None, None], tf.int32)
    gelu = lambda x: tf.nn.gelu(x, approximate=False)  # noqa: E731
    encode = tf.function(lambda ids, mask: _encode(weights, ids, mask, form, TF_OPS, gelu),
                         input_signature=[spec, spec])
    ours = encode(token_ids.astype("int32"), padding_mask.astype("int32")).numpy()
    expected = _expected(model, token_ids, padding_mask)
    real = padding_mask.astype(bool)
    np.testing.assert_allclose(ours[real], expected[real], rtol=RTOL, atol=atol_for(expected))
