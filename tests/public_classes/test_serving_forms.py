"""Every encoder layer against its serving form (`keras_bert_suite/layers/serving/`), for
each family's variation: BERT, RoBERTa's positions from the padding mask and single segment
row, DistilBERT without segments and its ReLU pooler, ELECTRA's embedding projection and GELU
pooler, ALBERT's tanh GELU and shared blocks, and a pruned encoder (per-layer heads and
widths). Random weights, LayerNorms included, so that a wrong epsilon, axis or activation
shows."""

import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from tests.harness import run_serving_form_test

BASE = dict(vocabulary_size=60, num_layers=3, num_heads=4, hidden_dim=16, intermediate_dim=24,
            max_sequence_length=12)
VARIATIONS = {
    "bert": {},
    "roberta": dict(num_segments=1, position_offset=2, layer_norm_epsilon=1e-5),
    "distilbert": dict(num_segments=0, pooler_activation="relu"),
    "electra": dict(embedding_dim=8, pooler_activation="gelu"),
    "albert": dict(embedding_dim=8, activation="gelu_approximate", num_layers=4,
                   num_layer_groups=2, layers_per_group=2),
    "pruned": dict(layer_num_heads=[4, 1, 2], layer_intermediate_dims=[24, 8, 4]),
}


def _randomized(encoder, seed=0):
    rng = np.random.default_rng(seed)
    for variable in encoder.weights:
        variable.assign(rng.normal(scale=0.5, size=variable.shape).astype("float32"))
    return encoder


def _inputs(num_segments, batch=3, length=10, seed=1):
    rng = np.random.default_rng(seed)
    lengths = np.array([length, 6, 3])[:batch]
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype("int32")
    segments = (np.arange(length)[None, :] >= 2).astype("int32") * mask
    return {"token_ids": rng.integers(3, 60, (batch, length)).astype("int32") * mask,
            "segment_ids": segments if num_segments > 1 else np.zeros_like(mask),
            "padding_mask": mask}


@pytest.mark.parametrize("family", list(VARIATIONS))
def test_every_layer_computes_what_its_serving_form_computes(family):
    encoder = _randomized(BertEncoder(**{**BASE, **VARIATIONS[family]},
                                      return_hidden_states=True))
    run_serving_form_test(encoder, _inputs(encoder.num_segments))
