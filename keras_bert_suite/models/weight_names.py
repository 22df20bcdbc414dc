"""Where the canonical weights live in our models.

The names and shapes are the table in `checkpoints/weight_table.py` (`embeddings/...`,
`layer_{i}/attention/qkv/kernel` [H, 3, N, H/N], ..., `pooler/...`, `mlm/...`, `nsp/...`),
which every checkpoint converter reads too; this module only says which Keras variable holds
each of its weights, so `BertEncoder.weight_map()` has exactly the table's names.
"""

import numpy as np

from keras_bert_suite.checkpoints import weight_table
from keras_bert_suite.layers.float_weights import float_embeddings, float_kernel
# One error class for "weights do not fit", whether a reader or the model notices it.
from keras_bert_suite.checkpoint_errors import CheckpointMismatchError  # noqa: F401

# Table module -> the Keras layer that holds it, found from the encoder (from transformer
# layer i for `layer_{i}/` weights) or from the head; the weight is that layer's `kernel`,
# `bias`, `gamma` or `beta` as the name ends, else the module is the variable itself.
_MODULES = {
    "embeddings/token_embedding":
        lambda encoder: float_embeddings(encoder.embeddings.token_embedding),
    "embeddings/segment_embedding":
        lambda encoder: float_embeddings(encoder.embeddings.segment_embedding),
    "embeddings/position_embedding": lambda encoder: encoder.embeddings.position_embedding,
    "embeddings/layer_norm": lambda encoder: encoder.embeddings.layer_norm,
    "embeddings/projection": lambda encoder: encoder.embedding_projection,
    "attention/qkv": lambda block: block.attention.qkv,
    "attention/output": lambda block: block.attention.output_dense,
    "attention_layer_norm": lambda block: block.attention_layer_norm,
    "intermediate": lambda block: block.intermediate_dense,
    "output": lambda block: block.output_dense,
    "output_layer_norm": lambda block: block.output_layer_norm,
    "pooler": lambda encoder: encoder.pooler,
    "mlm/transform": lambda head: head.transform,
    "mlm/layer_norm": lambda head: head.layer_norm,
    "mlm/output_bias": lambda head: head.output_bias,
    "nsp": lambda dense: dense,
    "rtd/dense": lambda head: head.dense,
    "rtd/prediction": lambda head: head.prediction,
}


def encoder_variables(encoder):
    """{canonical encoder weight name: keras.Variable} in the table's order."""
    layers = encoder.transformer_layers
    # Which weights exist follows the architecture arguments (not get_config, which also
    # walks every layer for the quantization record).
    architecture = encoder.config.to_dict("checkpoint")
    return _variables(weight_table.encoder_weights(architecture, shapes=False),
                      lambda weight: encoder if weight.layer is None else layers[weight.layer])


def masked_lm_head_variables(head):
    return _variables(weight_table.head_weights("mlm"), lambda weight: head)


def next_sentence_head_variables(dense):
    return _variables(weight_table.head_weights("nsp"), lambda weight: dense)


def replaced_token_head_variables(head):
    return _variables(weight_table.head_weights("rtd"), lambda weight: head)


def _variables(table, owner_of):
    variables = {}
    for weight in table:
        module, variable = weight_table.split_template(weight.template)
        found = _MODULES[module](owner_of(weight))
        if variable is None:
            variables[weight.name] = found
        else:  # a quantized model's kernels read back as floats (embedding tables: above)
            variables[weight.name] = (float_kernel(found) if variable == "kernel"
                                      else getattr(found, variable))
    return variables


def assign(variables, weights, owner):
    """Checks every name and shape first, then assigns, so a bad checkpoint changes nothing."""
    for name, variable in variables.items():
        if not hasattr(variable, "assign"):  # W + A B under LoRA, or a dequantized kernel
            raise ValueError(
                f"{owner}: '{name}' cannot be loaded while LoRA is enabled or the model is "
                f"quantized; load the checkpoint first, then call enable_lora or quantize "
                f"(from_preset(..., lora_rank=r) does it in that order).")
        if name not in weights:
            raise CheckpointMismatchError(
                f"{owner}: the checkpoint has no weight for '{name}' (expected shape "
                f"{tuple(variable.shape)}). Is it a BERT checkpoint with the same number of layers?")
        shape = tuple(np.shape(weights[name]))
        if shape != tuple(variable.shape):
            raise CheckpointMismatchError(
                f"{owner}: weight '{name}' has shape {shape} in the checkpoint but the model "
                f"expects {tuple(variable.shape)}. Does the config match the weights?")
    for name, variable in variables.items():
        variable.assign(np.asarray(weights[name], dtype=variable.dtype))
