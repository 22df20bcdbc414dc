"""Structured pruning: a new, smaller model without the given attention heads and
feed-forward neurons (smaller matrices and per-layer sizes in the config, not masks).

Removing a unit drops its slices of every weight that carries it, as the block kind declares
(`BlockKind.units`). BERT's block: removing head h drops its query, key and value columns
([H, 3, N, Dh] -> [H, 3, N', Dh]) and its rows of the attention output kernel ([N Dh, H] ->
[N' Dh, H]); removing neuron j drops column j of the first feed-forward kernel and bias
([H, I] -> [H, I']) and row j of the second ([I, H] -> [I', H]). The result computes exactly
what the unpruned model computes with those heads and neurons masked (`mask_units`).
"""

import keras
import numpy as np

from keras_bert_suite.pruning.rebuild import rebuild, without_adapters
from keras_bert_suite.pruning.units import (
    check_units, encoder_of, head_counts, keep_units, neuron_counts, uniform_changes)


def prune_units(model, heads_to_remove=None, neurons_to_remove=None):
    """A new model of `model`'s class without the given heads and feed-forward neurons.

    model: a `BertEncoder` or one of our task models (the task keeps its head weights,
        preprocessor and label names; it comes back compiled with the task's defaults).
    heads_to_remove: {layer index: [head indices]}, indices into that layer's current heads.
    neurons_to_remove: {layer index: [neuron indices]} of the feed-forward layer.

    Every layer keeps at least one head and one neuron. A model with LoRA adapters has them
    merged into its kernels first: the pruned model has none (call `enable_lora` again to
    fine-tune it with adapters). The new encoder's config has `layer_num_heads` /
    `layer_intermediate_dims`; `save_to_preset`, `.keras` files and `export_saved_model`
    hold it, the Hugging Face / Google BERT / KerasHub writers refuse it.

    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    >>> pruned = prune_units(encoder, heads_to_remove={0: [1]}, neurons_to_remove={1: [0, 5]})
    >>> pruned.layer_num_heads, pruned.layer_intermediate_dims
    ([1, 2], [512, 510])
    >>> encoder.count_params() - pruned.count_params()  # 64 (3 x 128 + 3 + 128) + 2 (128 + 1 + 128)
    33474
    """
    model = without_adapters(model)
    encoder = encoder_of(model)
    heads = check_units(heads_to_remove, head_counts(encoder), "heads_to_remove", "head")
    neurons = check_units(neurons_to_remove, neuron_counts(encoder), "neurons_to_remove",
                          "neuron")
    weights = {name: _numpy(variable) for name, variable in encoder.weight_map().items()}
    counts = {}
    for units, removed, per_layer in (("heads", heads, head_counts(encoder)),
                                      ("neurons", neurons, neuron_counts(encoder))):
        counts[units] = []
        for layer, count in enumerate(per_layer):
            kept = [unit for unit in range(count) if unit not in removed.get(layer, ())]
            if len(kept) < count:
                keep_units(weights, encoder, units, layer, kept)
            counts[units].append(len(kept))
    return rebuild(model, uniform_changes(encoder, counts), weights)


def prune_heads(model, heads_to_remove):
    """`prune_units(model, heads_to_remove=...)`: a new model without those attention heads.

    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    >>> prune_heads(encoder, {1: [0]}).layer_num_heads
    [2, 1]
    """
    return prune_units(model, heads_to_remove=heads_to_remove)


def prune_ffn(model, neurons_to_remove):
    """`prune_units(model, neurons_to_remove=...)`: a new model without those feed-forward
    neurons.

    >>> from keras_bert_suite import BertEncoder
    >>> encoder = BertEncoder.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False)
    >>> prune_ffn(encoder, {0: range(256)}).layer_intermediate_dims
    [256, 512]
    """
    return prune_units(model, neurons_to_remove=neurons_to_remove)


def _numpy(variable):
    return np.array(keras.ops.convert_to_numpy(variable))  # a copy (see rebuild)
