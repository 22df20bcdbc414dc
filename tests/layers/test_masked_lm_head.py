"""MaskedLMHead: gathers first, decodes through the tied token embedding."""

import math

import keras
import numpy as np

from keras_bert_suite.layers import MaskedLMHead
from tests.conftest import to_numpy
from tests.numerics import assert_close

VOCABULARY, HIDDEN = 30, 8


def _head():
    embedding = keras.layers.Embedding(VOCABULARY, HIDDEN)
    embedding.build()
    head = MaskedLMHead(embedding)
    head.build((None, None, HIDDEN), (None, None))
    rng = np.random.default_rng(0)
    # Non-trivial head weights, so that every term of the formula shows in the result.
    for variable in (head.transform.bias, head.layer_norm.gamma, head.layer_norm.beta,
                     head.output_bias):
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    return head


def _hidden_and_positions(batch=2, length=9, predictions=4, seed=1):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(batch, length, HIDDEN)).astype("float32")
    positions = rng.integers(0, length, (batch, predictions)).astype("int32")
    return hidden, positions


def _numpy_head(head, hidden):
    """BERT's cls/predictions on every row of `hidden` [..., H], in NumPy."""
    kernel, bias = (to_numpy(v) for v in (head.transform.kernel, head.transform.bias))
    x = hidden @ kernel + bias
    x = 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))  # exact GELU
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + 1e-12) * to_numpy(head.layer_norm.gamma) + to_numpy(
        head.layer_norm.beta)
    return x @ to_numpy(head.token_embedding.embeddings).T + to_numpy(head.output_bias)


def test_gathers_first_and_matches_full_decode_then_gather():
    head = _head()
    hidden, positions = _hidden_and_positions()
    logits = to_numpy(head(hidden, positions))
    assert logits.shape == (2, 4, VOCABULARY)  # [B, P, V], not [B, T, V]
    assert head.compute_output_shape(hidden.shape, positions.shape) == (2, 4, VOCABULARY)

    every_position = np.tile(np.arange(hidden.shape[1], dtype="int32"), (2, 1))  # [B, T]
    full_decode = to_numpy(head(hidden, every_position))  # [B, T, V]
    gathered = np.take_along_axis(full_decode, positions[:, :, None], axis=1)  # [B, P, V]
    assert_close(logits, gathered)
    # float64 numpy reference vs the float32 layer: a looser relative bound.
    assert_close(
        logits, np.take_along_axis(_numpy_head(head, hidden), positions[:, :, None], axis=1),
        rtol=1e-4, atol=1e-5)


def test_decoder_is_the_token_embedding():
    head = _head()
    embedding = head.token_embedding
    hidden, positions = _hidden_and_positions()
    # The head owns transform (2), layer norm (2) and output bias (1); the [V, H] decoder
    # matrix is the embedding's own variable, not a sixth one.
    own = [w for w in head.weights if w is not embedding.embeddings]
    assert len(own) == 5 and len(head.weights) == 6
    assert not any(tuple(w.shape) == (VOCABULARY, HIDDEN) for w in own)

    before = to_numpy(head(hidden, positions))
    embedding.embeddings.assign(embedding.embeddings * 2.0)
    after = to_numpy(head(hidden, positions))
    assert np.abs(after - before).max() > 1e-2


def test_standalone_config_round_trip(tmp_path):
    head = _head()
    hidden, positions = _hidden_and_positions()
    path = str(tmp_path / "head.keras")
    inputs = keras.Input((None, HIDDEN)), keras.Input((None,), dtype="int32")
    wrapper = keras.Model(inputs, head(*inputs))
    wrapper.save(path)
    restored = keras.saving.load_model(path)
    assert_close(restored([hidden, positions]), head(hidden, positions))
    assert isinstance(restored.layers[-1], MaskedLMHead)


def test_an_unknown_activation_is_a_clear_error():
    import pytest

    with pytest.raises(ValueError, match="activation must be one of"):
        MaskedLMHead(keras.layers.Embedding(VOCABULARY, HIDDEN), activation="relu")
