"""int8 matmul kernels for the serving graph, in two forms side by side.

Both store a kernel as int8 values with one symmetric scale per output column, made once at
export (`int8_copy`); one kernel-wide scale lost MiniLM's FFN output kernels, where a few
weights are 20-40x the typical column's largest.

* int8 (`precision="int8"`, `dequantized_dense`): the graph casts the values to float32,
  multiplies float32 activations by them in a plain MatMul and scales each output column.
  Cast, MatMul and Mul have CPU kernels on every x86-64 ISA (Eigen's too, without oneDNN),
  so the SavedModel computes the same answers on every CPU. Only the kernels are rounded:
  smaller than float32, not faster, and no input range to calibrate.
* int8_vnni (`precision="int8_vnni"`, `vnni_dense`): activations quantized to uint8 per
  call and multiplied by oneDNN's `QuantizedMatMulWithBiasAndDequantize` (uint8 x int8 ->
  int32). On VNNI / AMX that is 4-5x a float32 MatMul at 4,096 rows. Without VNNI oneDNN
  sums each u8 x s8 pair in saturating int16 (vpmaddubsw): under ONEDNN_MAX_CPU_ISA=AVX2 a
  product was off by 17% of its output range (0.5% with VNNI), and on an AMD Zen 3 (AVX2)
  every call failed with no output. `export/cpu_features.py` refuses the export on
  such a CPU. Around the op:

  - inputs: uint8 over each call's own [min, max] with zero included (what ONNX Runtime's
    dynamic quantization does), so no input range is fixed at export;
  - smoothing (SmoothQuant, Xiao et al. 2022): a few LayerNorm output channels are far
    larger than the rest, and one uint8 range per call spends its steps on them. Dividing
    input channel j by s_j and multiplying kernel row j by s_j computes the same product
    with those channels tamed; s_j balances the channel's input range against its kernel
    row's (`smoothing_factors`). The ranges come from calibration text or, without it, from
    the LayerNorm weights. (The int8 form does not smooth: with float32 inputs it moved
    MiniLM's outputs no closer to float32; docs/export.md.)
"""

import collections

import numpy as np
import tensorflow as tf

# kernel ~= diag(1 / input_scales) values / 127 diag(column_scales): `values` [in, out] int8;
# int8_vnni only: `column_sums` [out], the values' column sums as float32 (the op's input
# zero-point term), and `input_scales` [in], the smoothing's 1 / s (None: not smoothed).
Int8Kernel = collections.namedtuple(
    "Int8Kernel", ["values", "column_scales", "column_sums", "input_scales"])

# How much of each channel's range moves into the kernel: measured ranges are trusted more
# than ranges estimated from LayerNorm weights (MiniLM on held-out Rotten Tomatoes reviews:
# sentence-embedding cosine to float32, worst of 256, 0.988 unsmoothed, 0.993 estimated at
# 0.5, 0.998 calibrated at 0.75).
CALIBRATED_ALPHA, ESTIMATED_ALPHA = 0.75, 0.5
# A LayerNorm output channel x_j = n_j gamma_j + beta_j, with the normalized n_j mostly
# within +-3.
NORMALIZED_RANGE = 3.0


def int8_copy(kernel, vnni=False, smoothing=None):
    """A float kernel [in, ...] (the qkv kernel [H, 3, N, Dh] too) as an Int8Kernel [in, out]
    for `int8_dense`: the int8 form, or with `vnni` the int8_vnni form, its rows multiplied
    by `smoothing` [in] first when given."""
    if smoothing is not None and not vnni:
        raise ValueError("Only the int8_vnni form smooths its inputs.")
    kernel = np.asarray(tf.convert_to_tensor(kernel), np.float32)
    kernel = kernel.reshape(kernel.shape[0], -1)
    if smoothing is not None:
        kernel = kernel * smoothing[:, None]
    column_scales = np.maximum(np.abs(kernel).max(axis=0), 1e-30)
    values = np.clip(np.round(kernel / column_scales * 127.0), -127, 127).astype(np.int8)

    def stored(value):
        return tf.Variable(value, trainable=False)

    return Int8Kernel(
        stored(values), stored(column_scales),
        stored(values.sum(axis=0, dtype=np.int32).astype(np.float32)) if vnni else None,
        None if smoothing is None else stored((1.0 / smoothing).astype(np.float32)))


def int8_dense(x, kernel, bias):
    """x [M, in] @ kernel + bias in the kernel's form (int8_vnni's carries column sums)."""
    if kernel.column_sums is None:
        return dequantized_dense(x, kernel, bias)
    return vnni_dense(x, kernel, bias)


def dequantized_dense(x, kernel, bias):
    """The int8 form: float32 x times the values cast to float32, each output column then
    times its scale. (Scaling the cast kernel instead keeps MatMul + BiasAdd fused, but its
    [in, out] broadcast multiply runs on every call: MiniLM's batch-1 SavedModel took 1.34x
    float32's p50 that way, 1.17x scaling the output, in one process; at 4,096 rows the
    output's multiply costs ~12%, the kernel's nothing.)"""
    product = tf.matmul(x, tf.cast(tf.convert_to_tensor(kernel.values), tf.float32))
    scales = tf.convert_to_tensor(kernel.column_scales) * (1.0 / 127.0)
    return tf.nn.bias_add(product * scales, bias)


def vnni_dense(x, kernel, bias):
    """The int8_vnni form: x quantized to uint8 on the fly, times the int8 values on oneDNN's
    VNNI / AMX kernel.

    With MIN_FIRST inputs x ~= min + q (max - min) / 255, so x @ values needs min * column
    sums added. The op adds column_sums * 255 min / (max - min) itself, in integer units that
    its oneDNN 3 kernel no longer rescales; the bias passed in swaps that term for the right
    one, column_sums * min / 127 (tests/export/test_serving_precision.py checks the product
    against float32)."""
    if kernel.input_scales is not None:
        x = x * tf.convert_to_tensor(kernel.input_scales)
    low = tf.minimum(tf.reduce_min(x), 0.0)  # +inf / -inf for an empty batch become 0
    high = tf.maximum(tf.reduce_max(x), 0.0)
    quantized, low, high = tf.raw_ops.QuantizeV2(input=x, min_range=low, max_range=high,
                                                 T=tf.quint8, mode="MIN_FIRST")
    column_scales = tf.convert_to_tensor(kernel.column_scales)
    zero_point_term = low * (1.0 / 127.0 - 255.0 / (high - low))
    product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
        a=quantized, b=tf.bitcast(tf.convert_to_tensor(kernel.values), tf.qint8),
        bias=bias / column_scales + zero_point_term * kernel.column_sums,
        min_a=low, max_a=high, min_b=-1.0, max_b=1.0,
        min_freezed_output=-1.0, max_freezed_output=1.0,  # unused: the output is float32
        Toutput=tf.float32, input_quant_mode="MIN_FIRST")
    return product * column_scales


def smoothing_factors(input_range, kernel, calibrated):
    """s [in] = range^alpha / max|kernel row|^(1 - alpha): the input channel's range and the
    kernel row's meet in the middle (alpha 0.5) or closer to the kernel's."""
    alpha = CALIBRATED_ALPHA if calibrated else ESTIMATED_ALPHA
    kernel = np.asarray(tf.convert_to_tensor(kernel), np.float32)
    rows = np.abs(kernel.reshape(kernel.shape[0], -1)).max(axis=1)
    return (np.maximum(input_range, 1e-5) ** alpha
            / np.maximum(rows, 1e-5) ** (1.0 - alpha)).astype(np.float32)


def layer_norm_range(weights, layer_norm):
    """Estimated max |output| per channel of LayerNorm `layer_norm` ("layer_0/..."):
    |beta| + 3 |gamma| (a LayerNorm without bias, ModernBERT's: 3 |gamma|)."""
    def value(name):
        return np.abs(np.asarray(tf.convert_to_tensor(weights[f"{layer_norm}/{name}"]),
                                 np.float32))
    beta = value("beta") if f"{layer_norm}/beta" in weights else 0.0
    return beta + NORMALIZED_RANGE * value("gamma")
