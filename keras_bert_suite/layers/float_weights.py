"""Float views of weights that `keras.Model.quantize("int8")` replaced by int8 values and
scales, for the code that reads a weight instead of calling its layer: the fused projection's
query-only path, the masked-LM head's tied token embeddings and `weight_map()` (so every export
and checkpoint writer gets float weights from a quantized model).

Keras stores value = round(w * scale) with one scale per output column of a kernel (its first
axis is the input) and one per row of an embedding table, so w ~= value / scale.
"""

import math

from keras import ops

QUANTIZE_MODES = ("int8",)


def float_kernel(layer):
    """The float [in, ...out] kernel of a Dense / EinsumDense whose first axis is its input."""
    if layer.quantization_mode is None:
        return layer.kernel
    _check_mode(layer)
    values = layer.kernel  # the int8 variable: for int8 `kernel` returns it as it is
    outputs = tuple(values.shape[1:])
    if math.prod(layer.kernel_scale.shape) != math.prod(outputs):
        raise ValueError(f"'{layer.path}': {tuple(layer.kernel_scale.shape)} scales for a "
                         f"{tuple(values.shape)} kernel; expected one per output column.")
    scale = ops.reshape(layer.kernel_scale, (1,) + outputs)
    return ops.divide(ops.cast(values, "float32"), scale)


def float_embeddings(layer):
    """The float [rows, width] table of a keras.layers.Embedding."""
    if layer.quantization_mode is None:
        return layer.embeddings
    _check_mode(layer)
    return ops.divide(ops.cast(layer.embeddings, "float32"),  # the int8 table, as it is
                      ops.expand_dims(layer.embeddings_scale, -1))


def check_mode(mode, what):
    if mode not in QUANTIZE_MODES:
        raise ValueError(
            f"{what}.quantize({mode!r}): keras_bert_suite models support mode "
            f"{' or '.join(map(repr, QUANTIZE_MODES))} (int8 weights, activations quantized "
            "per call). For a SavedModel with int8 kernels for TF Serving, export the float "
            "model with precision='int8' instead.")


def _check_mode(layer):
    if layer.lora_enabled:  # `kernel` / `embeddings` would add the adapters to the int8 values
        raise ValueError(f"'{layer.path}' is quantized and has LoRA adapters; only a "
                         "quantized layer without them can be read back as floats.")
    if layer.quantization_mode not in QUANTIZE_MODES:
        raise ValueError(f"'{layer.path}' is quantized to {layer.quantization_mode}; only "
                         f"{QUANTIZE_MODES} weights can be read back as floats.")
