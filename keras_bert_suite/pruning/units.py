"""Which heads and feed-forward neurons a pruning call names, checked against the encoder:
the per-layer counts of a (possibly already pruned) encoder, and `{layer: [index, ...]}`
arguments validated with errors that say what was wrong and how to fix it."""

import numbers

from keras_bert_suite import transforms


def encoder_of(model):
    """`model` itself when it is a BertEncoder, else the encoder of one of our task models."""
    return transforms.encoder_of(model, "Pruning")


def head_counts(encoder):
    """[number of attention heads of layer i]."""
    return [block.attention.num_heads for block in encoder.transformer_layers]


def neuron_counts(encoder):
    """[feed-forward width of layer i]."""
    return [block.intermediate_dim for block in encoder.transformer_layers]


def head_dim(encoder):
    """The size of every head (pruning keeps it: hidden_dim // num_heads)."""
    return encoder.hidden_dim // encoder.num_heads


def uniform_or_list(sizes, default):
    """None when every layer has the default size (an unpruned config), else the list."""
    return None if all(size == default for size in sizes) else list(sizes)


def check_units(units, counts, argument, noun):
    """{layer: sorted unique indices} from `units` ({layer: [index, ...]} or None), checked
    against `counts` (units per layer); `argument` and `noun` ("head", "neuron") word the
    errors. A layer may not lose all its units."""
    if units is None:
        return {}
    if not hasattr(units, "items"):
        raise ValueError(f"{argument} must be a dict {{layer index: [{noun} indices]}}, e.g. "
                         f"{{0: [3, 7]}}, got {type(units).__name__}.")
    checked = {}
    for layer, indices in units.items():
        if not _is_index(layer) or not 0 <= layer < len(counts):
            raise ValueError(f"{argument}: layer {layer!r} is out of range; the encoder has "
                             f"{len(counts)} layers (0 to {len(counts) - 1}).")
        if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
            raise ValueError(f"{argument}[{layer}] must be a list of {noun} indices, got "
                             f"{indices!r}.")
        indices = list(indices)
        count = counts[layer]
        bad = [index for index in indices if not _is_index(index) or not 0 <= index < count]
        if bad:
            raise ValueError(f"{argument}[{layer}]: {noun} {bad[0]!r} is out of range; layer "
                             f"{layer} has {count} {noun}s (0 to {count - 1}).")
        unique = sorted({int(index) for index in indices})
        if len(unique) >= count:
            raise ValueError(f"{argument}[{layer}] removes all {count} {noun}s of layer "
                             f"{layer}; every layer keeps at least one (remove at most "
                             f"{count - 1}).")
        if unique:
            checked[int(layer)] = unique
    return checked


def _is_index(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
