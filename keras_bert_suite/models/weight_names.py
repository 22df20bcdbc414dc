"""Where the canonical weights live in our models.

The names and shapes are the table in `checkpoints/weight_table.py` (`embeddings/...`,
`layer_{i}/attention/qkv/kernel` [H, 3, N, H/N], ..., `pooler/...`, `mlm/...`, `nsp/...`),
which every checkpoint converter reads too; this module only says which Keras variable holds
each of its weights, so `BertEncoder.weight_map()` has exactly the table's names. A
transformer layer's modules are its block kind's to say (`BlockKind.modules`).
"""

import numpy as np

from keras_bert_suite.checkpoints import weight_table
from keras_bert_suite.layers.float_weights import float_embeddings, float_kernel
# One error class for "weights do not fit", whether a reader or the model notices it.
from keras_bert_suite.checkpoint_errors import CheckpointMismatchError  # noqa: F401

# Table module -> the Keras layer that holds it, found from the encoder or from the head
# (transformer layer i's `layer_{i}/` weights: from its block, as the block kind says); the weight is that layer's `kernel`,
# `bias`, `gamma` or `beta` as the name ends, else the module is the variable itself.
_MODULES = {
    "embeddings/token_embedding":
        lambda encoder: float_embeddings(encoder.embeddings.token_embedding),
    "embeddings/segment_embedding":
        lambda encoder: float_embeddings(encoder.embeddings.segment_embedding),
    "embeddings/position_embedding": lambda encoder: encoder.embeddings.position_embedding,
    "embeddings/layer_norm": lambda encoder: encoder.embeddings.layer_norm,
    "embeddings/projection": lambda encoder: encoder.embedding_projection,
    "mlm/transform": lambda head: head.transform,
    "mlm/layer_norm": lambda head: head.layer_norm,
    "mlm/output_bias": lambda head: head.output_bias,
    "nsp": lambda dense: dense,
    "rtd/dense": lambda head: head.dense,
    "rtd/prediction": lambda head: head.prediction,
}


def encoder_variables(encoder):
    """{canonical encoder weight name: keras.Variable} in the table's order."""
    blocks, modules = encoder.transformer_layers, encoder.block_kind.modules

    def holder(weight, module):
        if weight.layer is not None:
            return modules[module](blocks[weight.layer])
        if module in _MODULES:
            return _MODULES[module](encoder)
        if module == "pooler" or module.startswith("pooler/"):
            # "pooler/a/b": the pooler layer's attribute a.b (`EncoderPieces.pooler_weights`)
            found = encoder.pooler
            for name in module.split("/")[1:]:
                found = getattr(found, name)
            return found
        return encoder.shared_layers[module]  # a layer the block kind builds once

    # Which weights exist follows the architecture arguments (not get_config, which also
    # walks every layer for the quantization record).
    return _variables(weight_table.encoder_weights(encoder.config.to_dict(), shapes=False),
                      holder)


def masked_lm_head_variables(head):
    return _head_variables("mlm", head)


def next_sentence_head_variables(dense):
    return _head_variables("nsp", dense)


def replaced_token_head_variables(head):
    return _head_variables("rtd", head)


def _head_variables(name, head):
    return _variables(weight_table.head_weights(name),
                      lambda weight, module: _MODULES[module](head))


def _variables(table, holder):
    """{name: variable} of `table`'s weights; `holder(weight, module)` -> the layer."""
    variables = {}
    for weight in table:
        module, variable = weight_table.split_template(weight.template)
        found = holder(weight, module)
        if variable is None:
            variables[weight.name] = found
        elif getattr(found, variable, None) is None and variable in ("bias", "beta"):
            continue  # a layer without bias (ModernBERT's masked-LM head)
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
