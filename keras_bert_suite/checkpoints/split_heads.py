"""The attention layout of Keras' EinsumDense multi-head attention, which KerasHub's and Model
Garden's BERT encoders share: query, key and value as three kernels [H, N, Dh] and biases
[N, Dh], and the output kernel [N, Dh, H]. Ours stacks the three ([H, 3, N, Dh], [3, N, Dh])
and keeps the output kernel [H, H]; the numbers are the same, reshaped.

A converter names each of our templates in its format, with `{part}` (query, key or value)
where the format keeps the three apart, and passes `name` for one weight to `read`/`write`.
"""

import numpy as np

from keras_bert_suite.checkpoints import weight_table

PARTS = ("query", "key", "value")
# Where their shape differs from ours by more than the split (same numbers, reshaped).
THEIR_SHAPES = {"attention/output/kernel": ("N", "Dh", "H")}


def read(source, weight, name, sizes, their_shapes=THEIR_SHAPES):
    """Our `weight` (a weight_table.Weight) from a TensorSource whose variable is `name`;
    `their_shapes`: the format's shapes where they differ (KerasHub's DeBERTa keeps the
    output kernel [H, H], as ours)."""
    axis = _stacked_axis(weight, name)
    if axis is None:
        return source.get(name, _their_shape(weight, sizes, their_shapes)).reshape(weight.shape)
    part_shape = weight.shape[:axis] + weight.shape[axis + 1:]
    return np.stack([source.get(name.format(part=part), part_shape) for part in PARTS],
                    axis=axis)


def write(weight, value, name, sizes, their_shapes=THEIR_SHAPES):
    """{their variable name: array} for our `weight`'s `value`."""
    value = np.asarray(value)
    axis = _stacked_axis(weight, name)
    if axis is None:
        return {name: value.reshape(_their_shape(weight, sizes, their_shapes))}
    return {name.format(part=part): np.take(value, index, axis=axis)
            for index, part in enumerate(PARTS)}


def _stacked_axis(weight, name):
    """The axis of our qkv weights that the format splits into query, key and value."""
    if "{part}" not in name:
        return None
    return 1 if weight.template.endswith("/kernel") else 0


def _their_shape(weight, sizes, their_shapes):
    symbols = their_shapes.get(weight.template)
    return weight.shape if symbols is None else weight_table.resolve_shape(symbols, sizes)
