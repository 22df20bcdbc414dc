"""The same model with some heads and neurons switched off by zeroed weights: what a
structurally pruned model must compute (the tests compare the two), and what head scoring
measures.

Zeroing a unit's slices of its output weight (`Units.output`) is exactly masking it: a head's
rows of the attention output kernel (its context vectors then add nothing), a neuron's row of
the second feed-forward kernel.
"""

import keras
import numpy as np

from keras_bert_suite.pruning.rebuild import rebuild, without_adapters
from keras_bert_suite.pruning.units import (
    check_units, encoder_of, head_counts, neuron_counts, units_output_name, zero_units_output)


def mask_units(model, heads_to_mask=None, neurons_to_mask=None):
    """A copy of `model` (same class and sizes) whose given heads and feed-forward neurons
    contribute nothing: {layer index: [indices]} as `prune_units` takes them.

    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    >>> masked = mask_units(encoder, heads_to_mask={0: [1]})
    >>> kernel = keras.ops.convert_to_numpy(masked.transformer_layers[0].attention.output_dense.kernel)
    >>> bool((kernel[64:] == 0).all()), bool((kernel[:64] == 0).any())  # head 1's rows
    (True, False)
    """
    model = without_adapters(model)
    encoder = encoder_of(model)
    heads = check_units(heads_to_mask, head_counts(encoder), "heads_to_mask", "head")
    neurons = check_units(neurons_to_mask, neuron_counts(encoder), "neurons_to_mask", "neuron")
    weights = {name: np.array(keras.ops.convert_to_numpy(variable))
               for name, variable in encoder.weight_map().items()}
    for units, chosen in (("heads", heads), ("neurons", neurons)):
        for layer, indices in chosen.items():
            zero_units_output(weights[units_output_name(encoder, units, layer)], encoder, units,
                              layer, indices)
    return rebuild(model, {}, weights)
