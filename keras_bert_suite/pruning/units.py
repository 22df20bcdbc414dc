"""Which heads and feed-forward neurons a pruning call names, checked against the encoder:
the per-layer counts of a (possibly already pruned) encoder, and `{layer: [index, ...]}`
arguments validated with errors that say what was wrong and how to fix it. Where the units
sit in a block's weights is its block kind's to say (`BlockKind.units`); this module and
the pruning code around it slice, zero and score them from that declaration alone."""

import numbers

import numpy as np

from keras_bert_suite import transforms


def encoder_of(model):
    """`model` itself when it is a BertEncoder, else the encoder of one of our task models."""
    return transforms.encoder_of(model, "Pruning")


def unit_counts(encoder, units):
    """[number of `units` ("heads", "neurons") of block i]."""
    of = encoder.block_kind.units[units]
    return [of.count(block) for block in encoder.transformer_layers]


def head_counts(encoder):
    """[number of attention heads of layer i]."""
    return unit_counts(encoder, "heads")


def neuron_counts(encoder):
    """[feed-forward width of layer i]."""
    return unit_counts(encoder, "neurons")


def keep_units(weights, encoder, units, layer, kept):
    """Keeps only the `kept` indices of layer `layer`'s `units` in every weight that carries
    them (`weights`: {canonical name: NumPy array}, changed in place)."""
    of = encoder.block_kind.units[units]
    count = of.count(encoder.transformer_layers[layer])
    for template, (axis, groups) in of.axes.items():
        name = f"layer_{layer}/{template}"
        weights[name] = slice_units(weights[name], axis, groups, count, kept)


def zero_units_output(array, encoder, units, layer, indices):
    """Zeroes the `indices` of layer `layer`'s `units` in `array`, their output weight
    (`Units.output`, e.g. a head's rows of the attention output kernel): exactly masking
    them. In place; returns `array`."""
    of = encoder.block_kind.units[units]
    axis, groups = of.axes[of.output]
    return zero_units(array, axis, groups, of.count(encoder.transformer_layers[layer]),
                      indices)


def units_output_name(encoder, units, layer):
    """The canonical name of layer `layer`'s `units`' output weight."""
    return f"layer_{layer}/{encoder.block_kind.units[units].output}"


def units_input_name(encoder, units, layer):
    """The canonical name of the weight feeding layer `layer`'s `units`."""
    return f"layer_{layer}/{encoder.block_kind.units[units].input}"


def uniform_changes(encoder, counts):
    """The encoder config changes for per-block counts {units: [count of block i]}: each
    per-block argument (`Units.config_key`), None where every block keeps the default."""
    changes = {}
    for units, sizes in counts.items():
        of = encoder.block_kind.units[units]
        changes[of.config_key] = uniform_or_list(sizes, getattr(encoder, of.default_key))
    return changes


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


def slice_units(array, axis, groups, count, kept):
    """`array` with only the units `kept` (indices among `count`) along `axis`, which holds
    `groups` runs of `count` equal slices."""
    array = np.moveaxis(np.asarray(array), axis, 0)
    rest = array.shape[1:]
    width = array.shape[0] // (groups * count)
    kept_array = array.reshape((groups, count, width) + rest)[:, list(kept)]
    return np.moveaxis(kept_array.reshape((-1,) + rest), 0, axis)


def zero_units(array, axis, groups, count, units):
    """Zeroes the slices of `units` along `axis` of `array` (in place); returns it."""
    moved = np.moveaxis(array, axis, 0)  # a view
    width = moved.shape[0] // (groups * count)
    for group in range(groups):
        for unit in units:
            start = (group * count + unit) * width
            moved[start:start + width] = 0.0
    return array
