"""The names that cross module boundaries: the encoder's inputs and the serving signatures
every export has.

Plain constants, no imports: the exporter, the task models and the serving code (which must
not import Keras) all read them from here.
"""

# The encoder's inputs, in the order the `encoder_inputs` signature takes them.
ENCODER_INPUTS = ("token_ids", "segment_ids", "padding_mask")
# The pretrainer's extra input: the positions its masked-LM head decodes.
MASK_POSITIONS = "mask_positions"

# TF Serving answers a request that names no signature with this one: raw text in.
DEFAULT_SIGNATURE = "serving_default"
# The model on packed ids (ENCODER_INPUTS), for clients that tokenize themselves.
ENCODER_INPUTS_SIGNATURE = "encoder_inputs"

# What an export's encoder computes its matmuls in (`export_saved_model(precision=)`,
# `kbs export --precision` / `--quantize`): int8 kernels computed in float32 on any CPU, or
# int8_vnni, int8 arithmetic that only CPUs with VNNI / AMX compute right.
SERVING_PRECISIONS = ("float32", "bfloat16", "int8", "int8_vnni")
QUANTIZED_PRECISIONS = ("int8", "int8_vnni")
