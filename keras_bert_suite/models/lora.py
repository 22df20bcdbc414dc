"""Attaching LoRA adapters to a BertEncoder: which projections get them and the checks (the
layers themselves: layers/lora_dense.py). It needs only the encoder object; merging the
adapters back into plain kernels rebuilds the model, a transform above the models
(transforms/merge_lora.py).

Every transformer layer's four projections get rank-r adapters: the fused query/key/value
[H, 3H], the attention output [H, H], and the feed-forward [H, I] and [I, H]. Every other
encoder weight (embeddings, biases, LayerNorms, the pooler) is frozen, so a task model trains
its adapters and its head only.
"""

import math

from keras_bert_suite.layers.lora_dense import stored_kernel

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
    """`keras_bert_suite.transforms.without_lora`, at the path export/ and earlier code import
    it from."""
    from keras_bert_suite.transforms.merge_lora import without_lora as merged

    return merged(model)


def parameter_count(variables):
    return sum(math.prod(variable.shape) for variable in variables)


def _sides(layer):
    """(input size, output size) of a projection's kernel seen as a matrix."""
    shape = tuple(stored_kernel(layer).shape)
    return shape[0], math.prod(shape[1:])


def _largest_rank(encoder):
    return min(min(_sides(layer)) for _, layer in projections(encoder))
