"""Structured pruning: a new, smaller model without the given attention heads and
feed-forward neurons (smaller matrices and per-layer sizes in the config, not masks).

Removing head h of a layer drops its query, key and value columns ([H, 3, N, Dh] ->
[H, 3, N', Dh]) and its rows of the attention output kernel ([N Dh, H] -> [N' Dh, H]);
removing neuron j drops column j of the first feed-forward kernel and bias ([H, I] -> [H, I'])
and row j of the second ([I, H] -> [I', H]). The result computes exactly what the unpruned
model computes with those heads and neurons masked (`mask_units`).
"""

import keras
import numpy as np

from keras_bert_suite.pruning.rebuild import rebuild, without_adapters
from keras_bert_suite.pruning.units import (
    check_units, encoder_of, head_counts, head_dim, neuron_counts, uniform_or_list)


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
    size = head_dim(encoder)
    new_heads, new_widths = [], []
    for layer, (count, width) in enumerate(zip(head_counts(encoder), neuron_counts(encoder))):
        kept_heads = [h for h in range(count) if h not in heads.get(layer, ())]
        kept_neurons = [j for j in range(width) if j not in neurons.get(layer, ())]
        _slice_layer(weights, layer, kept_heads, kept_neurons, size)
        new_heads.append(len(kept_heads))
        new_widths.append(len(kept_neurons))
    changes = {"layer_num_heads": uniform_or_list(new_heads, encoder.num_heads),
               "layer_intermediate_dims": uniform_or_list(new_widths, encoder.intermediate_dim)}
    return rebuild(model, changes, weights)


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


def _slice_layer(weights, layer, kept_heads, kept_neurons, size):
    """Keeps `kept_heads` and `kept_neurons` of layer `layer` in `weights` (in place)."""
    def name(template):
        return f"layer_{layer}/{template}"

    qkv = weights[name("attention/qkv/kernel")]  # [H, 3, N, Dh]
    weights[name("attention/qkv/kernel")] = qkv[:, :, kept_heads]
    weights[name("attention/qkv/bias")] = weights[name("attention/qkv/bias")][:, kept_heads]
    output = weights[name("attention/output/kernel")]  # [N Dh, H], head-major rows
    output = output.reshape(-1, size, output.shape[-1])[kept_heads]  # [N', Dh, H]
    weights[name("attention/output/kernel")] = output.reshape(-1, output.shape[-1])
    weights[name("intermediate/kernel")] = weights[name("intermediate/kernel")][:, kept_neurons]
    weights[name("intermediate/bias")] = weights[name("intermediate/bias")][kept_neurons]
    weights[name("output/kernel")] = weights[name("output/kernel")][kept_neurons]  # [I', H]


def _numpy(variable):
    return np.array(keras.ops.convert_to_numpy(variable))  # a copy (see rebuild)
