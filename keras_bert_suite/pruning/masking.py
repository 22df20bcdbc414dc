"""The same model with some heads and neurons switched off by zeroed weights: what a
structurally pruned model must compute (the tests compare the two), and what head scoring
measures.

Zeroing a head's rows of the attention output kernel is exactly a head mask (its context
vectors then add nothing); zeroing a neuron's row of the second feed-forward kernel is
exactly removing that neuron.
"""

import keras
import numpy as np

from keras_bert_suite.pruning.rebuild import rebuild, without_adapters
from keras_bert_suite.pruning.units import (
    check_units, encoder_of, head_counts, head_dim, neuron_counts)


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
    for layer, indices in heads.items():
        zero_head_rows(weights[f"layer_{layer}/attention/output/kernel"], indices,
                       head_dim(encoder))
    for layer, indices in neurons.items():
        weights[f"layer_{layer}/output/kernel"][indices] = 0.0  # [I, H]: neuron j's row
    return rebuild(model, {}, weights)


def zero_head_rows(kernel, heads, size):
    """Zeroes the rows of `heads` in an attention output kernel [N Dh, H] (in place)."""
    for head in heads:
        kernel[head * size:(head + 1) * size] = 0.0
    return kernel
