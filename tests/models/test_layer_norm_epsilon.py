"""The encoder's layer norms use BERT's epsilon, 1e-12 (Hugging Face's `layer_norm_eps`,
Google's `LayerNorm` in modeling.py), at every site: embeddings, after attention, after the
feed-forward.

Parity tests with trained weights cannot see a wrong epsilon: activations there have variance
~1, so 1e-6 instead of 1e-12 moves outputs by ~1e-7. Here every layer norm gets an input of
variance ~1e-8 (tiny embedding tables; each layer norm's gamma 1e-4 so the next one's input
is tiny too), where an epsilon of 1e-6 would shrink the output ten-fold. The expected output
is a numpy chain of layer norms written out here.
"""

import numpy as np

from keras_bert_suite import BertEncoder
from tests.conftest import to_numpy

EPSILON = 1e-12
TINY_SCALE = 1e-4
CONFIG = dict(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
              intermediate_dim=16, max_sequence_length=16, dropout=0.0)


def _layer_norm(x, gamma):
    x = np.asarray(x, np.float64)
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + EPSILON) * gamma


def test_every_layer_norm_uses_epsilon_1e_12():
    encoder = BertEncoder(**CONFIG)
    rng = np.random.default_rng(0)
    tables, last_gamma = {}, f"transformer_layer_{CONFIG['num_layers'] - 1}/output_layer_norm"
    for weight in encoder.weights:
        shape = tuple(weight.shape)
        if "embedding" in weight.path and not weight.path.startswith("embeddings/layer_norm"):
            value = rng.normal(0.0, TINY_SCALE, shape)  # variance ~1e-8
            tables[weight.path.split("/")[1]] = value
        elif weight.path.endswith("gamma"):
            value = np.full(shape, 1.0 if weight.path.startswith(last_gamma) else TINY_SCALE)
        else:  # every kernel and bias of the blocks and pooler: the sub-layers add nothing
            value = np.zeros(shape)
        weight.assign(value.astype("float32"))
    assert set(tables) == {"token_embedding", "position_embedding", "segment_embedding"}

    token_ids = np.array([[2, 5, 7, 9, 3, 0], [4, 4, 8, 1, 0, 0]], "int32")
    segment_ids = np.array([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 0, 0]], "int32")
    padding_mask = (token_ids > 0).astype("int32")
    got = to_numpy(encoder({"token_ids": token_ids, "segment_ids": segment_ids,
                            "padding_mask": padding_mask})["sequence_output"])

    summed = (tables["token_embedding"][token_ids]
              + tables["position_embedding"][None, :token_ids.shape[1]]
              + tables["segment_embedding"][segment_ids])
    x = _layer_norm(summed, TINY_SCALE)  # embeddings' layer norm
    for layer in range(CONFIG["num_layers"]):
        x = _layer_norm(x, TINY_SCALE)  # after attention (which adds 0)
        x = _layer_norm(x, 1.0 if layer == CONFIG["num_layers"] - 1 else TINY_SCALE)
    assert np.abs(x).max() > 0.5  # unit-variance output: the chain is not degenerate
    np.testing.assert_allclose(got, x, rtol=1e-3, atol=1e-4)
