"""Every layer in keras_bert_suite/layers/ through `run_layer_test`, with outputs checked
against NumPy forward passes written here from the layers' weights (BERT's formulas)."""

import math

import keras
import numpy as np

from keras_bert_suite.layers import (
    BertDropout, BertEmbeddings, BertSelfAttention, FoldChoices, MaskedLMHead,
    ReplacedTokenHead, ScalarMix, TransformerBlock)
from tests.harness import run_layer_test, to_numpy

B, T, H, N, V = 2, 6, 8, 2, 50  # batch, sequence, hidden, heads, vocabulary
RNG = np.random.default_rng(0)
X = RNG.normal(size=(B, T, H)).astype("float32")
PADDING = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], "int32")
MASK = PADDING.astype(bool)[:, None, None, :]  # [B, 1, 1, T]
POSITIONS = np.array([[0, 2, 5], [0, 1, 3]], "int32")  # [B, 3]


def _weights(layer):
    return {w.path.split("/", 1)[1] if "/" in w.path else w.path: to_numpy(w)
            for w in layer.weights}


def _layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _attention(attention, x, mask, queries=None):
    """Scaled dot-product attention (Vaswani et al. 3.2) from the fused [H, 3, N, Dh] kernel."""
    kernel, bias = to_numpy(attention.qkv.kernel), to_numpy(attention.qkv.bias)
    q_in = x if queries is None else queries
    q = np.einsum("bth,hnd->btnd", q_in, kernel[:, 0]) + bias[0]
    k = np.einsum("bth,hnd->btnd", x, kernel[:, 1]) + bias[1]
    v = np.einsum("bth,hnd->btnd", x, kernel[:, 2]) + bias[2]
    scores = np.einsum("bqnd,bknd->bnqk", q, k) / math.sqrt(kernel.shape[-1])
    scores = np.where(mask, scores, -1e9)
    context = np.einsum("bnqk,bknd->bqnd", _softmax(scores), v)
    context = context.reshape(context.shape[0], context.shape[1], -1)
    return context @ to_numpy(attention.output_dense.kernel) + to_numpy(
        attention.output_dense.bias)


def _block(block, x, mask, positions=None):
    queries = None if positions is None else np.take_along_axis(x, positions[:, :, None], 1)
    attended = _attention(block.attention, x, mask, queries)
    residual = x if queries is None else queries
    ln1, ln2 = block.attention_layer_norm, block.output_layer_norm
    h = _layer_norm(residual + attended, to_numpy(ln1.gamma), to_numpy(ln1.beta),
                    block.layer_norm_epsilon)
    inner = _gelu(h @ to_numpy(block.intermediate_dense.kernel)
                  + to_numpy(block.intermediate_dense.bias))
    out = inner @ to_numpy(block.output_dense.kernel) + to_numpy(block.output_dense.bias)
    return _layer_norm(h + out, to_numpy(ln2.gamma), to_numpy(ln2.beta),
                       block.layer_norm_epsilon)


# === BertEmbeddings ===


EMBEDDINGS = dict(vocabulary_size=V, max_sequence_length=16, num_segments=2, hidden_dim=H,
                  dropout=0.1, layer_norm_epsilon=1e-6, initializer_range=0.5)


def _embeddings_reference(layer, data):
    token = to_numpy(layer.token_embedding.embeddings)[data["token_ids"]]
    segment = to_numpy(layer.segment_embedding.embeddings)[data["segment_ids"]]
    position = to_numpy(layer.position_embedding)[:data["token_ids"].shape[1]]
    return _layer_norm(token + segment + position, to_numpy(layer.layer_norm.gamma),
                       to_numpy(layer.layer_norm.beta), layer.layer_norm_epsilon)


def test_bert_embeddings():
    data = {"token_ids": RNG.integers(0, V, (B, T)).astype("int32"),
            "segment_ids": (np.arange(T) >= 3).astype("int32")[None].repeat(B, 0)}
    run_layer_test(BertEmbeddings, EMBEDDINGS, data, expected_output_shape=(B, T, H),
                   expected_output=_embeddings_reference,
                   expected_num_trainable_weights=5)  # token, segment, position, LN gamma, beta


# === BertSelfAttention ===


ATTENTION = dict(num_heads=N, hidden_dim=H, dropout=0.1, initializer_range=0.3)


def test_bert_self_attention():
    run_layer_test(
        BertSelfAttention, ATTENTION, {"x": X, "attention_mask": MASK},
        expected_output_shape=(B, T, H),
        expected_output=lambda layer, d: _attention(layer, d["x"], d["attention_mask"]),
        expected_num_trainable_weights=4)  # fused qkv kernel + bias, output kernel + bias


def test_bert_self_attention_at_some_queries():
    queries = np.take_along_axis(X, POSITIONS[:, :, None], 1)  # [B, 3, H]
    run_layer_test(
        BertSelfAttention, ATTENTION, {"x": X, "attention_mask": MASK, "queries": queries},
        expected_output_shape=(B, 3, H),
        expected_output=lambda layer, d: _attention(layer, d["x"], d["attention_mask"],
                                                    d["queries"]),
        run_training_check=False)  # the same weights train in the test above


# === TransformerBlock ===


BLOCK = dict(num_heads=N, hidden_dim=H, intermediate_dim=16, dropout=0.1,
             layer_norm_epsilon=1e-6, initializer_range=0.3)


def test_transformer_block():
    run_layer_test(
        TransformerBlock, BLOCK, {"x": X, "attention_mask": MASK},
        expected_output_shape=(B, T, H),
        expected_output=lambda layer, d: _block(layer, d["x"], d["attention_mask"]),
        expected_num_trainable_weights=12)  # attention 4, 2 LayerNorms 4, FFN 4


def test_transformer_block_at_some_positions():
    run_layer_test(
        TransformerBlock, BLOCK, {"x": X, "attention_mask": MASK, "positions": POSITIONS},
        expected_output_shape=(B, 3, H),
        expected_output=lambda layer, d: _block(layer, d["x"], d["attention_mask"],
                                                d["positions"]),
        run_training_check=False)  # the pretrainer's training step runs this path


# === MaskedLMHead ===


def _tanh_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _head_reference(layer, data):
    x = np.take_along_axis(data["sequence_output"], data["mask_positions"][:, :, None], 1)
    gelu = _tanh_gelu if layer.activation == "gelu_approximate" else _gelu
    x = gelu(x @ to_numpy(layer.transform.kernel) + to_numpy(layer.transform.bias))
    x = _layer_norm(x, to_numpy(layer.layer_norm.gamma), to_numpy(layer.layer_norm.beta),
                    layer.layer_norm_epsilon)
    return x @ to_numpy(layer.token_embedding.embeddings).T + to_numpy(layer.output_bias)


def test_masked_lm_head():
    embedding = keras.layers.Embedding(V, H, embeddings_initializer="random_normal",
                                       name="token_embedding")
    run_layer_test(
        MaskedLMHead, dict(token_embedding=embedding, layer_norm_epsilon=1e-6,
                           initializer_range=0.3),
        {"sequence_output": X, "mask_positions": POSITIONS},
        expected_output_shape=(B, 3, V), expected_output=_head_reference,
        expected_num_trainable_weights=6)  # tied embedding, transform 2, LN 2, output bias


def test_masked_lm_head_of_narrow_embeddings():
    """ALBERT's and ELECTRA's head: the transform projects H -> E (the embedding width) and
    ALBERT's GELU is the tanh approximation."""
    embedding = keras.layers.Embedding(V, H // 2, embeddings_initializer="random_normal",
                                       name="token_embedding")
    run_layer_test(
        MaskedLMHead, dict(token_embedding=embedding, activation="gelu_approximate"),
        {"sequence_output": X, "mask_positions": POSITIONS},
        expected_output_shape=(B, 3, V), expected_output=_head_reference,
        expected_num_trainable_weights=6)


# === ReplacedTokenHead ===


def test_replaced_token_head():
    def reference(layer, data):
        hidden = _gelu(data @ to_numpy(layer.dense.kernel) + to_numpy(layer.dense.bias))
        return (hidden @ to_numpy(layer.prediction.kernel) + to_numpy(layer.prediction.bias))[
            ..., 0]

    run_layer_test(ReplacedTokenHead, dict(hidden_dim=H, initializer_range=0.3), X,
                   expected_output_shape=(B, T), expected_output=reference,
                   expected_num_trainable_weights=4)


# === ScalarMix ===


def test_scalar_mix():
    hidden_states = RNG.normal(size=(B, 3, T, H)).astype("float32")
    # Fresh weights: softmax(0, 0, 0) = 1/3 each and gamma = 1, an equal-weight average.
    run_layer_test(ScalarMix, {}, hidden_states, expected_output_shape=(B, T, H),
                   expected_output=hidden_states.mean(axis=1),
                   expected_num_trainable_weights=2)


# === FoldChoices ===


def test_fold_choices():
    token_ids = RNG.integers(0, V, (B, 3, T)).astype("int32")
    run_layer_test(FoldChoices, {}, token_ids, expected_output_shape=(B * 3, T),
                   expected_output=token_ids.reshape(B * 3, T))


# === BertDropout ===


def test_bert_dropout():
    # At inference dropout is the identity (the training-time statistics: tests/layers).
    run_layer_test(BertDropout, dict(rate=0.25, seed=7), X, expected_output_shape=(B, T, H),
                   expected_output=X, expected_num_trainable_weights=0)
