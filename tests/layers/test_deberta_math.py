"""DeBERTa-v3's math (layers/relative_positions, disentangled_attention) against transformers'
DebertaV2Model: a tiny model with v3's settings, random weights (norms too) and fewer position
buckets than the sequence has tokens (8 buckets, 20 tokens), so log buckets and their clamp both
matter; a padded row; a test-local forward chains the functions to its `last_hidden_state`."""

import numpy as np
import pytest
from keras import ops

from keras_bert_suite.layers.disentangled_attention import (
    disentangled_attention, relative_embeddings)
from keras_bert_suite.layers.gelu import exact_gelu
from keras_bert_suite.layers.layer_norm import layer_norm
from keras_bert_suite.layers.relative_positions import (
    relative_index_table, relative_indices)
from tests.conftest import to_numpy
from tests.layers.torch_reference import (
    RTOL, atol_for, numpy_weights, padded_batch, randomized, run)

# microsoft/deberta-v3-base's settings on a tiny shape.
CONFIG = dict(vocab_size=97, hidden_size=32, num_attention_heads=4, intermediate_size=48,
              num_hidden_layers=2, max_position_embeddings=32, relative_attention=True,
              position_buckets=8, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
              share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
              type_vocab_size=0, layer_norm_eps=1e-7, hidden_act="gelu", pad_token_id=0)
HEADS, HEAD_DIM, EPSILON = 4, 8, 1e-7
TABLE = relative_index_table(CONFIG["position_buckets"], CONFIG["max_position_embeddings"])


@pytest.fixture(scope="module")
def reference():
    """(model, its weights, token ids [2, 20], padding mask [2, 20]: the second row 13 tokens)."""
    from transformers import DebertaV2Config, DebertaV2Model

    model = randomized(lambda: DebertaV2Model(DebertaV2Config(**CONFIG)))
    return (model, numpy_weights(model)) + padded_batch(CONFIG["vocab_size"])


@pytest.mark.parametrize("buckets, max_position", [(256, 512), (8, 32), (4, 10), (16, 24)])
def test_the_index_table_is_transformers_clamped_log_buckets(buckets, max_position):
    """v3's 256 / 512 and small shapes, over distances far beyond the table's reach."""
    import torch
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

    table = relative_index_table(buckets, max_position)
    distances = np.arange(-5 * max_position, 5 * max_position + 1)
    expected = torch.clamp(make_log_bucket_position(torch.from_numpy(distances), buckets,
                                                    max_position).long() + buckets,
                           0, 2 * buckets - 1).numpy()
    reach = (len(table) - 1) // 2
    np.testing.assert_array_equal(table[np.clip(distances, -reach, reach) + reach], expected)


def test_relative_indices_are_the_table_by_distance():
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    import torch

    length = 40
    dummy = torch.zeros(1, length, 1)
    expected = build_relative_position(dummy, dummy, CONFIG["position_buckets"],
                                       CONFIG["max_position_embeddings"])[0] + 8
    np.testing.assert_array_equal(to_numpy(relative_indices(length, TABLE)),
                                  np.clip(expected.numpy(), 0, 15))


def _projected(x, weights, prefix, name, ops):
    """x [.., H] through `{prefix}.{name}` (kernel and bias) -> [.., N, Dh]."""
    kernel = weights[f"{prefix}.{name}.weight"].T.reshape(-1, HEADS, HEAD_DIM)
    bias = weights[f"{prefix}.{name}.bias"].reshape(HEADS, HEAD_DIM)
    return ops.einsum("...h,hnd->...nd", x, kernel) + bias


def _self_attention(x, rel, indices, keep, weights, index, ops):
    """DisentangledSelfAttention's context [B, T, H] from the functions, layer `index`."""
    prefix = f"encoder.layer.{index}.attention.self"
    query, key, value = (_projected(x, weights, prefix, name, ops)
                         for name in ("query_proj", "key_proj", "value_proj"))
    # share_att_key: the relative embeddings go through the tokens' query and key projections.
    position_query = _projected(rel, weights, prefix, "query_proj", ops)
    position_key = _projected(rel, weights, prefix, "key_proj", ops)
    context = disentangled_attention(query, key, value, position_query, position_key, indices,
                                     keep, ops)
    batch, length = ops.shape(context)[0], ops.shape(context)[1]
    return ops.reshape(context, (batch, length, HEADS * HEAD_DIM))


def _dense(x, weights, name, ops):
    return ops.matmul(x, weights[f"{name}.weight"].T) + weights[f"{name}.bias"]


def _norm(x, weights, name, ops):
    return layer_norm(x, weights[f"{name}.weight"], weights[f"{name}.bias"], EPSILON, ops)


def _encode(weights, token_ids, padding_mask, ops=ops, activation=exact_gelu):
    """DebertaV2Model's forward from the functions: embeddings (no position rows), the
    normalized relative embeddings, BERT's post-LayerNorm blocks around disentangled
    attention."""
    x = ops.take(weights["embeddings.word_embeddings.weight"], token_ids, axis=0)
    x = _norm(x, weights, "embeddings.LayerNorm", ops)
    x = x * ops.cast(padding_mask, "float32")[:, :, None]
    rel = relative_embeddings(weights["encoder.rel_embeddings.weight"],
                              weights["encoder.LayerNorm.weight"],
                              weights["encoder.LayerNorm.bias"], EPSILON, ops)
    indices = relative_indices(ops.shape(token_ids)[1], TABLE, ops)
    keep = ops.cast(padding_mask, "bool")[:, None, None, :]
    for index in range(CONFIG["num_hidden_layers"]):
        layer = f"encoder.layer.{index}"
        attended = _self_attention(x, rel, indices, keep, weights, index, ops)
        x = _norm(x + _dense(attended, weights, f"{layer}.attention.output.dense", ops),
                  weights, f"{layer}.attention.output.LayerNorm", ops)
        hidden = activation(_dense(x, weights, f"{layer}.intermediate.dense", ops))
        x = _norm(x + _dense(hidden, weights, f"{layer}.output.dense", ops), weights,
                  f"{layer}.output.LayerNorm", ops)
    return x


def _expected(model, token_ids, padding_mask):
    return run(model, token_ids, attention_mask=padding_mask).last_hidden_state.numpy()


def test_disentangled_self_attention_matches(reference):
    import torch

    model, weights, _, padding_mask = reference
    x = np.random.default_rng(1).normal(size=(2, 20, CONFIG["hidden_size"])).astype("float32")
    encoder = model.encoder
    with torch.no_grad():
        rel = encoder.get_rel_embedding()
        expected, _ = encoder.layer[1].attention.self(
            torch.from_numpy(x), encoder.get_attention_mask(torch.from_numpy(padding_mask)),
            relative_pos=encoder.get_rel_pos(torch.from_numpy(x)), rel_embeddings=rel)
    expected = expected.numpy()
    ours = to_numpy(_self_attention(
        x, rel.numpy(), relative_indices(20, TABLE),
        padding_mask.astype(bool)[:, None, None, :], weights, 1, ops))
    real = padding_mask.astype(bool)  # transformers' padded queries see no key at all
    np.testing.assert_allclose(ours[real], expected[real], rtol=RTOL, atol=atol_for(expected))


def test_the_chained_functions_give_last_hidden_state(reference):
    model, weights, token_ids, padding_mask = reference
    expected = _expected(model, token_ids, padding_mask)
    ours = to_numpy(_encode(weights, token_ids, padding_mask))
    real = padding_mask.astype(bool)
    np.testing.assert_allclose(ours[real], expected[real], rtol=RTOL, atol=atol_for(expected))


@pytest.mark.needs_tf_graph
def test_the_tensorflow_form_in_a_graph_of_unknown_shape(reference):
    """The same functions over TensorFlow ops, traced once for any batch and length (a serving
    graph), give transformers' numbers."""
    import tensorflow as tf

    from tests.layers.tf_namespace import TF_OPS

    model, weights, token_ids, padding_mask = reference
    spec = tf.TensorSpec([None, None], tf.int32)
    gelu = lambda x: tf.nn.gelu(x, approximate=False)  # noqa: E731
    encode = tf.function(lambda ids, mask: _encode(weights, ids, mask, TF_OPS, gelu),
                         input_signature=[spec, spec])
    ours = encode(token_ids.astype("int32"), padding_mask.astype("int32")).numpy()
    expected = _expected(model, token_ids, padding_mask)
    real = padding_mask.astype(bool)
    np.testing.assert_allclose(ours[real], expected[real], rtol=RTOL, atol=atol_for(expected))
