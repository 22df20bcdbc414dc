"""Each encoder layer's serving form: the function of the Keras layer of the same name in
`keras_bert_suite/layers/` (and the encoder's projection and pooler, `Dense` layers), written
in plain TensorFlow ops for exported SavedModels.

The Keras layers trace into a SavedModel as Keras writes them for every backend: einsum
projections, Dense on 3-D inputs (reshape, matmul, reshape, then the bias) and Keras'
attention. The forms here compute the same functions from the same weights in the shapes
TensorFlow's CPU runtime (oneDNN) and Grappler's remapper handle best: activations flattened
to 2-D [B T, width], `MatMul` + `BiasAdd` pairs (fused into one oneDNN call), batched
matmuls for attention, padding as an additive key bias, and bf16 or int8 kernels where the
export asks for them (`dense.py`).

A form reads its layer's weights through `read(name)`, the layer's canonical weight names
(`checkpoints/weight_table.py`) without the encoder's prefix ("qkv/kernel",
"layer_norm/gamma"): float32 tensors, or the export's bf16 / int8 copies of matmul kernels.
`export/serving_encoder.py` composes them into the encoder; `tests/public_classes/
test_serving_forms.py` compares every form with its Keras layer for every family's
variation. TensorFlow ops only (never keras.ops): the forms run in any Keras backend's
process, on any backend's weights.
"""
