"""Every registered block kind's declarations agree with each other and with its layer: what
LoRA, pruning, the layout map, the weight table and the export read must name real weights."""

import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.checkpoints import weight_table
from keras_bert_suite.layers.blocks import BLOCK_INPUT, BLOCK_KINDS


@pytest.mark.parametrize("name", sorted(BLOCK_KINDS))
def test_declarations_name_the_kinds_own_weights(name):
    kind = BLOCK_KINDS[name]
    modules = {weight_table.split_template(template)[0] for template in kind.weights}
    assert modules == set(kind.modules)
    assert set(kind.lora) <= modules
    assert set(kind.layout) <= set(kind.weights)
    assert set(kind.precision_overrides) <= set(kind.weights)
    assert set(kind.smoothed_inputs) <= set(kind.weights)
    norms = set(kind.smoothed_inputs.values()) - {BLOCK_INPUT}
    assert norms | ({kind.output_norm} if kind.output_norm else set()) <= modules
    for units in kind.units.values():
        assert {units.output, units.input} - {None} <= set(units.axes) <= set(kind.weights)


@pytest.mark.parametrize("name", sorted(BLOCK_KINDS))
def test_an_encoder_of_the_kind_holds_what_the_kind_declares(name):
    kind = BLOCK_KINDS[name]
    encoder = BertEncoder(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
                          intermediate_dim=16, block=name)
    assert encoder.block_kind is kind
    assert all(isinstance(block, kind.layer) for block in encoder.transformer_layers)
    weights = encoder.weight_map()
    config = encoder.config.to_dict()
    # each template in the first block that has it (`absent`: ModernBERT's block 0 has no
    # attention norm)
    at = {template: f"layer_{1 if template in kind.absent(config, 0) else 0}/{template}"
          for template in kind.weights}
    for template, symbols in kind.weights.items():
        shape = weight_table.resolve_shape(symbols, weight_table.dimensions(config))
        assert tuple(weights[at[template]].shape) == shape, template
    block = encoder.transformer_layers[0]
    for units in kind.units.values():
        count = units.count(block)
        for template, (axis, groups) in units.axes.items():
            size = np.shape(weights[at[template]])[axis]
            assert size % (groups * count) == 0, (template, size, count)
