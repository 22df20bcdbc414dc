"""LoRA on a BertEncoder: which projections get adapters, the checks, and the merged copy
that exports serve (the layers themselves: layers/lora_dense.py).

Every transformer layer's four projections get rank-r adapters: the fused query/key/value
[H, 3H], the attention output [H, H], and the feed-forward [H, I] and [I, H]. Every other
encoder weight (embeddings, biases, LayerNorms, the pooler) is frozen, so a task model trains
its adapters and its head only.
"""

import math

import keras

from keras_bert_suite.layers.lora_dense import stored_kernel
from keras_bert_suite.models.find_encoder import find_encoder

# (name in error messages, the projection) of each transformer layer.
PROJECTIONS = {
    "attention/qkv": lambda block: block.attention.qkv,
    "attention/output": lambda block: block.attention.output_dense,
    "intermediate": lambda block: block.intermediate_dense,
    "output": lambda block: block.output_dense,
}


def projections(encoder):
    """[(name, layer)] of every projection that takes adapters, in layer order."""
    return [(f"transformer_layer_{index}/{name}", of(block))
            for index, block in enumerate(encoder.transformer_layers)
            for name, of in PROJECTIONS.items()]


def check_rank(encoder, rank, alpha):
    """A rank must be a positive integer no larger than the smallest side of any projection
    (beyond that A B is no longer low-rank, only bigger)."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"lora_rank must be a positive integer, got {rank!r}.")
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float))
                              or alpha <= 0):
        raise ValueError(f"lora_alpha must be a positive number, got {alpha!r}.")
    for name, layer in projections(encoder):
        inputs, outputs = _sides(layer)
        if rank > min(inputs, outputs):
            raise ValueError(
                f"lora_rank={rank} is larger than layer '{name}' ({inputs} -> {outputs}): a "
                f"rank above {min(inputs, outputs)} is no longer low-rank. Pick lora_rank <= "
                f"{_largest_rank(encoder)} (4 to 16 is usual).")


def enable(encoder, rank, alpha=None):
    """Adds adapters to every projection and freezes every other encoder weight."""
    check_rank(encoder, rank, alpha)
    if encoder.lora_rank is not None:
        raise ValueError(f"LoRA is already enabled on this encoder (rank "
                         f"{encoder.lora_rank}); it can be enabled once.")
    layers = [layer for _, layer in projections(encoder)]
    if any(layer.quantization_mode is not None for layer in layers):
        raise ValueError("LoRA on a quantized encoder is not supported: enable LoRA on the "
                         "float model, train, merge it (without_lora), then quantize.")
    for layer in layers:
        layer.enable_lora(rank, lora_alpha=alpha)
    adapters = {id(layer.lora_kernel_a) for layer in layers} | {
        id(layer.lora_kernel_b) for layer in layers}
    for variable in encoder.weights:
        if id(variable) not in adapters:
            variable.trainable = False


def without_lora(model):
    """`model` (an encoder or a task) with each W + alpha / r A B folded into a plain kernel,
    as a new model without adapters; `model` itself when it has none. The copy computes the
    same function at the cost of the model without LoRA: exports serve it."""
    from keras_bert_suite.models.rebuild import rebuild, weight_arrays

    encoder = find_encoder(model)
    if getattr(encoder, "lora_rank", None) is None:  # no adapters (or not one of our models)
        return model
    # weight_map() reads each adapted kernel merged; the adapters are outside the table.
    return rebuild(model, {"lora_rank": None, "lora_alpha": None}, weight_arrays(encoder))


def parameter_count(variables):
    return sum(math.prod(variable.shape) for variable in variables)


def _sides(layer):
    """(input size, output size) of a projection's kernel seen as a matrix."""
    shape = tuple(stored_kernel(layer).shape)
    return shape[0], math.prod(shape[1:])


def _largest_rank(encoder):
    return min(min(_sides(layer)) for _, layer in projections(encoder))
