"""Attaching LoRA adapters to a BertEncoder: which projections get them and the checks (the
layers themselves: layers/lora_dense.py). It needs only the encoder object; merging the
adapters back into plain kernels rebuilds the model, a transform above the models
(transforms/merge_lora.py).

Every transformer layer's projections that its block kind lists (`BlockKind.lora`; BERT's
block: the fused query/key/value [H, 3H], the attention output [H, H], and the feed-forward
[H, I] and [I, H]) get rank-r adapters. Every other encoder weight (embeddings, biases,
LayerNorms, the pooler) is frozen, so a task model trains its adapters and its head only.
"""

import math

from keras_bert_suite.layers.lora_dense import stored_kernel

def projections(encoder):
    """[(name, layer)] of every projection that takes adapters, in layer order."""
    kind = encoder.block_kind
    return [(f"{block.name}/{module}", kind.modules[module](block))
            for block in encoder.transformer_layers for module in kind.lora]


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


def parameter_count(variables):
    return sum(math.prod(variable.shape) for variable in variables)


def _sides(layer):
    """(input size, output size) of a projection's kernel seen as a matrix."""
    shape = tuple(stored_kernel(layer).shape)
    return shape[0], math.prod(shape[1:])


def _largest_rank(encoder):
    return min(min(_sides(layer)) for _, layer in projections(encoder))
